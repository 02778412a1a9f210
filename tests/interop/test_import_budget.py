"""``tfdist-tui import`` on hostile inputs, through the real command: every one ends in a
located error (exit 2) within the budgets hosts.yaml has, never a traceback or a machine
eaten by memory."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tui.config.yamlload import MAX_FILE_BYTES
from tui.interop.importer import MAX_REPLICAS

REPO = Path(__file__).resolve().parents[2]


def tfjob(replicas: dict[str, int]) -> str:
    container = {"name": "tensorflow", "image": "i", "command": ["python", "train.py"]}
    return yaml.safe_dump({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "x"},
                           "spec": {"tfReplicaSpecs": {
                               kind: {"replicas": n, "template": {"spec": {"containers": [container]}}}
                               for kind, n in replicas.items()}}}, sort_keys=False)


def run_import(source: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """The real command, limited to 1 GiB of memory; (result, its peak RSS in KiB)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    result = subprocess.run([sys.executable, "-m", "tui.cli", "import", str(source)], cwd=REPO,
                            capture_output=True, text=True, timeout=60, preexec_fn=limit)
    return result, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


@pytest.mark.parametrize(("name", "text", "where", "message"), [pytest.param(*case, id=case[0]) for case in [
    ("billion.yaml", tfjob({"PS": 1, "Worker": 1_000_000_000}), ":", "at most 1000 can be imported"),
    ("many.yaml", tfjob({"PS": 600, "Worker": 600}), ":", "make 1200 tasks in all"),
    ("deep.json", '{"cluster": ' + '{"a": ' * 10_000 + "1" + "}" * 10_001, ":1:", "nested more than 50 deep"),
    ("deep-array.json", '{"cluster": {"ps": ' + "[" * 60_000, ":1:", "nested more than 50 deep"),
    ("big.json", '{"cluster": {"ps": ["a:1"]}, "x": "' + "y" * (MAX_FILE_BYTES + 10) + '"}', "",
     "larger than"),
]])
def test_hostile_imports_end_in_a_located_error(tmp_path: Path, name: str, text: str, where: str,
                                                message: str) -> None:
    source = tmp_path / name
    source.write_text(text)
    result, _ = run_import(source)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {source}{where}") and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


def test_the_largest_allowed_import_is_quick(tmp_path: Path) -> None:
    source = tmp_path / "most.yaml"
    source.write_text(tfjob({"PS": 10, "Worker": MAX_REPLICAS - 10}))
    result, _ = run_import(source)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("    - localhost:auto") == MAX_REPLICAS
