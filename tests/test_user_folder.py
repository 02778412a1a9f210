"""The controller imports only itself and its dependencies (issue 30): a user's folder that
holds modules named like the standard library's or ours (``secrets.py``, ``yaml.py``,
``typing.py``, a ``tui/`` ...) changes nothing in the headless controller run as the
installed ``tfdist-tui`` command. The app's core: tests/app/test_process_bridge.py; the warm
pool: tests/launch/test_warm_venv.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.venvs import SHADOWING, plant_shadows

#: The user's program, in a folder of its own: says its job and ends.
PROGRAM = "import sys\nprint('hello from', sys.argv[1], flush=True)\n"


def test_headless_from_a_folder_of_shadowing_modules(tmp_path: Path) -> None:
    command = Path(sys.executable).parent / "tfdist-tui"
    if not command.exists():
        pytest.skip(f"tfdist-tui is not installed beside {sys.executable} (pip install -e .)")
    work = tmp_path / "work"
    code = tmp_path / "code"
    work.mkdir()
    code.mkdir()
    markers = plant_shadows(work, SHADOWING)
    (code / "prog.py").write_text(PROGRAM)
    (work / "hosts.yaml").write_text(
        f"program:\n  command: {sys.executable} {code / 'prog.py'} {{job}}\n  shim: false\n"
        "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    done = subprocess.run([str(command), "hosts.yaml", "--no-ui"], cwd=work, capture_output=True,
                          text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "worker0 | hello from worker" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert [m.name for m in markers if m.exists()] == []
