"""The list of benchmarks: found by scanning the group packages, each with what it measures
and its run time; ``python -m bench NAME`` runs one, a wrong name is a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import catalog

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_group_module_with_a_run_time_is_listed_with_it() -> None:
    found = {b.name: b for b in catalog.discover()}
    for group in ("training", "controller", "hosts"):
        assert any(name.startswith(f"{group}.") for name in found), group
    assert "controller.flood" in found and "training.warm" in found and "hosts.lab_start" in found
    # Helpers that a benchmark runs are not benchmarks.
    assert "controller.flood_task" not in found and "training.runs" not in found
    assert not any(name.startswith("harness") for name in found)
    for benchmark in found.values():
        assert catalog.RUN_TIME_FORM.fullmatch(benchmark.run_time), benchmark
        assert benchmark.summary and "``" not in benchmark.summary, benchmark


def test_a_new_module_shows_up_without_registration(tmp_path: Path) -> None:
    group = tmp_path / "bench" / "hosts"
    group.mkdir(parents=True)
    (group / "__init__.py").write_text("")
    (group / "soak.py").write_text('"""Hours of many hosts: what leaks.\n\nMore."""\n'
                                   'RUN_TIME = "about 60 min"\n')
    (group / "helper.py").write_text('"""Not a benchmark."""\n')
    (group / "__main__.py").write_text('"""Many hosts at once. Run as a package."""\n'
                                       'RUN_TIME = "about 20 min"\n')
    harness = tmp_path / "bench" / "harness"
    harness.mkdir()
    (harness / "__init__.py").write_text("")
    (harness / "timer.py").write_text('RUN_TIME = "about 1 min"\n')
    found = catalog.discover(tmp_path / "bench")
    assert [(b.name, b.module, b.run_time, b.summary) for b in found] == [
        ("hosts", "bench.hosts", "about 20 min", "Many hosts at once"),
        ("hosts.soak", "bench.hosts.soak", "about 60 min", "Hours of many hosts: what leaks")]


def test_names_resolve_by_group_module_path_or_unique_stem() -> None:
    found = catalog.discover()
    for name in ("flood", "controller.flood", "bench.controller.flood", "bench/controller/flood.py"):
        assert catalog.find(name, found).module == "bench.controller.flood"
    with pytest.raises(catalog.UnknownBenchmark, match="python -m bench --list"):
        catalog.find("nosuch", found)


def test_list_and_run_one_from_the_command_line() -> None:
    listed = _run("--list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == len(catalog.discover())
    flood = next(line for line in lines if line.startswith("controller.flood "))
    assert "about " in flood and "Log flood into the Textual app" in flood
    helped = _run("slurm_start", "--help")
    assert helped.returncode == 0 and "usage: python -m bench.hosts.slurm_start" in helped.stdout
    wrong = _run("nosuch")
    assert wrong.returncode == 2
    assert "no benchmark 'nosuch'" in wrong.stderr and "Traceback" not in wrong.stderr
