"""The host probe (tui/launch/snippets/probe.py) reads TensorFlow's version from the installed
package's metadata without importing it (seconds of CPU a host), imports only a TensorFlow
that has no metadata, and says plainly when there is none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.launch import snippets

pytestmark = pytest.mark.integration  # (the interpreter with TensorFlow installed)

#: Runs the probe as the SSH launcher does (its source with ``-c``), then says whether
#: TensorFlow was imported.
RUNNER = """\
import sys
source, args = sys.argv[1], sys.argv[2:]
sys.argv = ["-c", *args]
exec(compile(source, "probe", "exec"), {"__name__": "probe"})
print("imported", "tensorflow" in sys.modules)
"""


def probe(tmp_path: Path, *args: str, pythonpath: str = "") -> tuple[dict[str, object], bool]:
    source = snippets.source("probe").replace('if __name__ == "__main__":', 'if True:')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run([sys.executable, "-c", RUNNER, source, str(tmp_path), *args], capture_output=True,
                            text=True, timeout=120, env=env, cwd=tmp_path)
    answer = next(line for line in result.stdout.splitlines() if line.startswith("tfdist-result "))
    # (Where the probe imported TensorFlow it ends at once, with os._exit: no line then.)
    imported = "imported False" not in result.stdout.splitlines()
    return json.loads(answer.removeprefix("tfdist-result ")), imported


def test_the_version_comes_from_metadata_without_importing_tensorflow(tmp_path: Path) -> None:
    from importlib import metadata

    answer, imported = probe(tmp_path)
    assert answer["tf_version"] == metadata.version("tensorflow") and answer["tf_error"] is None
    assert not imported


def test_a_tensorflow_without_metadata_is_imported_to_be_found(tmp_path: Path) -> None:
    stub = tmp_path / "stub" / "tensorflow"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("__version__ = '0.0+stub'\n")
    answer, imported = probe(tmp_path, pythonpath=str(stub.parent))
    assert answer["tf_version"] == "0.0+stub" and imported  # (only its import knows that version)


def test_no_tensorflow_is_said_plainly_and_no_tf_looks_for_none(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    source = snippets.source("probe")
    result = subprocess.run([str(venv / "bin" / "python"), "-c", source, str(tmp_path)], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert "ModuleNotFoundError: No module named 'tensorflow'" in result.stdout, result.stdout + result.stderr
    answer, imported = probe(tmp_path, "no-tf")
    assert answer["tf_version"] is None and answer["tf_error"] is None and not imported
