"""Warm starts from a plain venv, the README's install (issue 30): the pool runs the venv's
interpreter by the path the task would run, so it sees the venv's site-packages, and two
names of one interpreter share one pool. The venv sees TensorFlow through a ``.pth`` in its
own site-packages only (tests/support/venvs.py); the base interpreter behind its symlink
does not see it there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.venvs import SHADOWING, plain_venv, plant_shadows
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.local.launcher import LocalLauncher
from tui.launch.local.warm import WarmTask
from tui.launch.streams import each_line

REPO = Path(__file__).resolve().parents[2]
LOCAL = HostSpec(name="localhost", address="localhost")
TASK = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)
#: Under the shim: says which interpreter (by its prefix) and which folder it runs in.
WHO = "import os, sys\nprint(sys.prefix, os.getcwd(), flush=True)\n"


async def test_a_plain_venv_task_is_served_by_a_pool_of_the_venv(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Started from a folder of the user's holding modules named like the pool's own imports:
    # the pool imports none of them (its tasks get their own folder back).
    work = tmp_path / "work"
    work.mkdir()
    markers = plant_shadows(work, SHADOWING)
    monkeypatch.chdir(work)
    python = plain_venv(tmp_path / "v")
    venv = python.parent.parent
    script = tmp_path / "who.py"
    script.write_text(WHO)
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")}
    launcher = LocalLauncher()
    try:
        tasks = []
        for name in ("python", "python3"):  # two names of one venv's interpreter
            argv = [str(python.parent / name), "-m", "trainer.shim", str(script)]
            task = await launcher.start(TASK, LOCAL, argv, env, str(tmp_path))
            assert isinstance(task, WarmTask), getattr(task, "launch_notice", "")
            tasks.append(task)
            line = await anext(each_line(task.output()))
            assert line.text == f"{venv} {tmp_path}"
            assert await task.wait() == 0
        pools = launcher.warm_pools
        assert pools is not None and len(pools.pools) == 1
        (pool,) = pools.pools
        assert pool.python == str(python) and pool.key.prefix == str(venv)  # as given, not resolved
        assert pools.take_notice() == ""
    finally:
        await launcher.close()
    assert [m.name for m in markers if m.exists()] == []


async def test_a_pool_that_cannot_start_says_why_and_what_to_do_once(tmp_path: Path) -> None:
    # A venv that sees no TensorFlow: its pool fails; its tasks start cold, one notice.
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    script = tmp_path / "quick.py"
    script.write_text("print('hi')\n")
    argv = [str(venv / "bin" / "python"), "-m", "trainer.shim", str(script)]
    env = {"PYTHONPATH": str(REPO)}
    launcher = LocalLauncher()
    try:
        first = await launcher.start(TASK, LOCAL, argv, env, str(tmp_path))
        assert not isinstance(first, WarmTask)
        notice = first.launch_notice  # type: ignore[attr-defined]
        assert "warm start unavailable" in notice and "tensorflow" in notice.lower()
        assert f"`{venv / 'bin' / 'python'} -m trainer.warm shim`" in notice and "--cold" in notice
        second = await launcher.start(TASK, LOCAL, argv, env, str(tmp_path))
        assert second.launch_notice == ""  # type: ignore[attr-defined]
        for task in (first, second):
            await task.wait()
    finally:
        await launcher.close()
