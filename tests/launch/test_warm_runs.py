"""Whole runs through the headless controller, warm (the default) and ``--cold``: the built-in
trainer and an example program reach the same end, and the start-up lines say which tasks
were forked from a warm pool. No trainer or pool survives either run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.clirun import write_hosts
from tests.support.scenarios import run_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
STARTING = re.compile(r"^(\w+)\s+\| -- starting \(pid \d+(, warm start)?\)$", re.M)


def _starts(out: str) -> dict[str, bool]:
    """Task -> whether it was warm-started, from the headless start-up lines."""
    return {m.group(1): bool(m.group(2)) for m in STARTING.finditer(out)}


def _summary(out: str) -> list[str]:
    """The summary's lines that must agree warm and cold: each task's end, and the target
    reached (the last step may overshoot by a timing-dependent step or two, either way)."""
    lines = [" ".join(m.groups()) for m in
             re.finditer(r"^\s+((?:ps|worker)\d)\s+(\w+), exit code (-?\d+)", out, re.M)]
    steps = re.search(r"^\s+steps\s+(\d+) / (\d+)", out, re.M)
    assert steps and int(steps.group(1)) >= int(steps.group(2)), out[-2000:]
    return lines


async def test_builtin_trainer_warm_and_cold_reach_the_same_end(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"steps": 60, "seed": 7})
    ends = {}
    for flags in ([], ["--cold"]):
        result = await run_to_end([str(hosts), "--no-ui", "--run-dir", str(tmp_path / "runs"), *flags],
                                  tmp_path, fake=False)
        assert result.code == 0, result.out[-3000:] + result.err[-3000:]
        assert _starts(result.out) == dict.fromkeys(("ps0", "worker0", "worker1"), not flags)
        ends[bool(flags)] = _summary(result.out)
    assert ends[False] and ends[False] == ends[True]


async def test_example_program_warm_and_cold_reach_the_same_end(tmp_path: Path) -> None:
    example = tmp_path / "example"
    shutil.copytree(REPO / "examples" / "tf_config_monitored", example)
    hosts = example / "hosts.yaml"
    # One ps and one worker: the cold run's imports are the slow part of this test.
    hosts.write_text(hosts.read_text().replace("steps: 1000", "steps: 40")
                     .replace("ps: [localhost:auto, localhost:auto]", "ps: [localhost:auto]")
                     .replace("worker: [localhost:auto, localhost:auto]", "worker: [localhost:auto]"))
    ends = {}
    for flags in ([], ["--cold"]):
        result = await run_to_end([str(hosts), "--no-ui", "--run-dir", str(tmp_path / "runs"), *flags],
                                  example, fake=False)
        assert result.code == 0, result.out[-3000:] + result.err[-3000:]
        starts = _starts(result.out)
        assert set(starts) == {"ps0", "worker0"}
        assert set(starts.values()) == {not flags}
        ends[bool(flags)] = _summary(result.out)
    assert ends[False] and ends[False] == ends[True]
