"""Helpers for tests that run the controller as a separate process and check, with psutil,
that none of its trainer processes outlive it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import yaml

from tests.support import async_wait_until
from trainer.warm import POOL_ENV
from tui.launch.deathsig import dying_with_parent

REPO = Path(__file__).resolve().parents[2]
FAKE_TRAINER = Path(__file__).resolve().parent / "fake_trainer.py"
FAKE_CLI = Path(__file__).resolve().parent / "fake_cli.py"
#: Set in the controller's environment; every task inherits it, so a test finds its own
#: task processes (and nobody else's) by it.
TAG_ENV = "TFDIST_TEST_TAG"


def write_hosts(path: Path, *, ps: Sequence[str] = ("localhost:auto",),
                workers: Sequence[str] = ("localhost:auto", "localhost:auto"),
                training: dict[str, Any] | None = None, run_dir: Path | None = None) -> Path:
    document: dict[str, Any] = {
        "cluster": {"ps": list(ps), "worker": list(workers)},
        "training": {"model": "mlp", "dataset": "digits", "steps": 200, **(training or {})},
    }
    if run_dir is not None:
        document["run_dir"] = str(run_dir)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def tagged_env(**extra: str) -> tuple[str, dict[str, str]]:
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_ENV: tag, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return tag, env


def is_trainer(cmdline: Sequence[str]) -> bool:
    text = " ".join(cmdline)
    return "-m trainer" in text or FAKE_TRAINER.name in text


def survivors(tag: str, pools: bool = False) -> list[psutil.Process]:
    """Live (non-zombie) trainer processes carrying ``tag`` in their environment; with
    ``pools``, the warm pools (fork servers, issue 25) that started them too."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue  # already dead, waiting to be reaped
            if not is_trainer(process.info["cmdline"] or []):
                continue
            environ = process.environ()
            if environ.get(TAG_ENV) == tag and (pools or POOL_ENV not in environ):
                found.append(process)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to inspect
    return found


async def wait_no_survivors(tag: str, timeout: float = 5.0) -> list[psutil.Process]:
    """Poll until no tagged trainer process is alive; return those still alive at the end.
    (Dead non-children cannot be awaited, so this polls, bounded by ``timeout``.)"""
    try:
        await async_wait_until(lambda: not survivors(tag, pools=True), timeout)
    except AssertionError:
        pass
    return survivors(tag, pools=True)


def kill_all(processes: list[psutil.Process]) -> None:
    """Clean up after a failed test so it does not leak processes into the next one."""
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


async def start_controller(args: Sequence[str], env: dict[str, str], cwd: Path,
                           fake: bool = False, own_session: bool = False) -> asyncio.subprocess.Process:
    """``python -m tui.cli ARGS`` (or the fake-trainer driver) with piped stdout/stderr.

    ``own_session``: in a session of its own, as a controller started from a terminal is
    (and killed with this test process). With the kernel's autogroup scheduling the CPU is
    shared out by session: in pytest's, the controller shares one share with every xdist
    worker, while each task of the other tests (a session each) has a whole one, and a
    loaded suite starved it for seconds: a test timing the controller (the 5 s stop) then
    timed the machine."""
    program = [sys.executable, str(FAKE_CLI)] if fake else [sys.executable, "-m", "tui.cli"]
    hook = None
    if own_session:
        program, hook = dying_with_parent(program)
    return await asyncio.create_subprocess_exec(
        *program, *args, env=env, cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, limit=16 * 1024 * 1024,
        start_new_session=own_session, preexec_fn=hook)


async def read_json_until(process: asyncio.subprocess.Process,
                          predicate: Callable[[dict[str, Any]], bool],
                          timeout: float) -> list[dict[str, Any]]:
    """Read ``--json`` records from the controller until one matches; all records so far."""
    assert process.stdout is not None
    records: list[dict[str, Any]] = []

    async def read() -> list[dict[str, Any]]:
        assert process.stdout is not None
        while True:
            line = await process.stdout.readline()
            if not line:
                raise AssertionError(f"controller ended before the expected event: {records[-5:]}")
            record = json.loads(line)
            records.append(record)
            if predicate(record):
                return records

    return await asyncio.wait_for(read(), timeout)


def all_running(names: Sequence[str]) -> Callable[[dict[str, Any]], bool]:
    """A predicate true once every named task reported running."""
    running: set[str] = set()

    def check(record: dict[str, Any]) -> bool:
        if record.get("type") == "task_state" and record.get("new") == "running":
            running.add(record["task"])
        return running >= set(names)

    return check

