"""End-to-end scenarios of the controller as a process: ``tfdist-tui HOSTS.yaml --no-ui``.

Each scenario runs once against the fake trainer (tests/test_controller_process.py,
always) and once against the real ``python -m trainer`` (test_integration_trainer.py,
marked ``integration``), so both prove the same things."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bench.harness.processes import stacks_of
from tests.support.clirun import (
    REPO,
    all_running,
    kill_all,
    read_json_until,
    start_controller,
    survivors,
    tagged_env,
    wait_no_survivors,
    write_hosts,
)

#: How long a task may take from launch to the end of a short run.
RUN_TIMEOUT = {True: 60.0, False: 300.0}
#: The issue's promise: Ctrl-C / SIGTERM stop everything and exit within 5 s; after a
#: SIGKILL of the controller its tasks are gone within 5 s.
STOP_WITHIN = 5.0


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str


@contextlib.asynccontextmanager
async def controller(args: list[str], tmp_path: Path, fake: bool,
                     **env: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A running controller and its tag; on the way out nothing of it may be left."""
    tag, full_env = tagged_env(FAKE_DIR=str(tmp_path), **env)
    # Its own session: the stop is timed (5 s), and in pytest's the CPU it gets is the suite's.
    process = await start_controller(args, full_env, cwd=tmp_path, fake=fake, own_session=True)
    try:
        yield process, tag
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        kill_all(survivors(tag, pools=True))


async def run_to_end(args: list[str], tmp_path: Path, fake: bool, **env: str) -> Finished:
    async with controller(args, tmp_path, fake, **env) as (process, tag):
        assert process.stdout is not None and process.stderr is not None
        out, err = bytearray(), bytearray()

        async def read(stream: asyncio.StreamReader, into: bytearray) -> None:
            while chunk := await stream.read(1 << 16):
                into += chunk

        readers = asyncio.gather(read(process.stdout, out), read(process.stderr, err))
        # Its exit, then the end of its output, each waited for on its own: a controller that
        # never ended, and one whose output a process it started still holds open, fail with
        # what it printed and what of the run is left (waiting on both at once said neither).
        deadline = asyncio.get_running_loop().time() + RUN_TIMEOUT[fake]
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), RUN_TIMEOUT[fake])
            await asyncio.wait_for(asyncio.shield(readers),
                                   max(STOP_WITHIN, deadline - asyncio.get_running_loop().time()))
        except asyncio.TimeoutError:
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
            state = "still running" if process.returncode is None else \
                f"exited {process.returncode}, its output still open"
            commands = [" ".join(p.cmdline()) for p in survivors(tag, pools=True)]
            said = out.decode(errors="replace")[-3000:] + err.decode(errors="replace")[-3000:]
            stacks = await stacks_of(process.pid) if process.returncode is None else ""
            raise AssertionError(f"the controller did not end ({state}); left of the run: {commands}\n{said}"
                                 f"{stacks}") from None
        left = await wait_no_survivors(tag, STOP_WITHIN)
        assert not left, f"trainer processes survived: {[p.pid for p in left]}"
        assert process.returncode is not None
        return Finished(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


async def default_run_succeeds(tmp_path: Path, fake: bool) -> None:
    """The repository's hosts.yaml, headless: exit 0, a summary, a complete run dir."""
    runs = tmp_path / "runs"
    result = await run_to_end([str(REPO / "hosts.yaml"), "--no-ui", "--run-dir", str(runs)],
                              tmp_path, fake)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert "tfdist  | run succeeded" in result.out
    for name in ("ps0", "worker0", "worker1"):
        assert f"  {name:<7}  succeeded, exit code 0" in result.out
    assert "  final loss   " in result.out and "  accuracy     " in result.out
    (run_dir,) = runs.iterdir()
    assert f"  run dir      {run_dir}" in result.out
    # The real trainer's chief checkpoints into the run directory (no checkpoint_dir set), and
    # its workers write TensorBoard event files there (no summary_dir set).
    checkpoints = [] if fake else ["checkpoints", "tensorboard"]
    assert sorted(p.name for p in run_dir.iterdir()) == sorted([
        "config.yaml", "controller.lock", "events.jsonl", "logs", "summary.json", "tasks",
        "traffic.json", "traffic.jsonl", *checkpoints])
    if not fake:
        # Why a step takes what it takes, measured (sampled steps of the real trainer).
        assert "  a step       " in result.out and "sampled steps" in result.out
        assert list((run_dir / "checkpoints").glob("model.ckpt-*.index"))
        assert_tensorboard_scalars(run_dir / "tensorboard", summary_step=2000)
    names = ("ps0", "worker0", "worker1")
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [f"{n}.log" for n in names]
    assert sorted(p.name for p in (run_dir / "tasks").iterdir()) == [f"{n}.json" for n in names]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "succeeded"
    assert summary["global_step"] >= summary["target"] > 0
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = {r["event"]["event"] for r in records if r["type"] == "trainer_event"}
    assert {"ready", "placement", "step", "done"} <= kinds
    assert records[-1]["type"] == "run_finished"


def assert_tensorboard_scalars(folder: Path, summary_step: int) -> None:
    """TensorFlow's own event-file reader (TensorBoard reads the same files; TensorBoard
    itself is not installed here) finds every worker's loss and the chief's accuracy."""
    from trainer.tfimport import import_tf

    tf = import_tf()
    assert sorted(p.name for p in folder.iterdir()) == ["worker0", "worker1"]
    scalars: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for worker in ("worker0", "worker1"):
        found = scalars.setdefault(worker, {})
        for path in sorted((folder / worker).glob("events.out.tfevents.*")):
            for event in tf.compat.v1.train.summary_iterator(str(path)):
                for value in event.summary.value:
                    found.setdefault(value.tag, []).append((event.step, value.simple_value))
    chief = scalars["worker0"]
    assert {"loss", "examples_per_sec", "accuracy"} <= set(chief)
    assert chief["loss"] and all(v > 0 for _, v in chief["loss"])
    step, accuracy = chief["accuracy"][-1]
    assert step >= summary_step and 0 < accuracy <= 1
    assert scalars["worker1"]["loss"]


async def failing_task_exits_1(tmp_path: Path, fake: bool) -> None:
    """A training setting the trainer rejects at run time: exit 1, the failed task's exit
    code and last lines in the summary."""
    hosts = write_hosts(tmp_path / "hosts.yaml",
                        training={"dataset": "mnist", "data_path": str(tmp_path / "no-such-dir")})
    env = {"FAKE_FAIL_EARLY": "*"} if fake else {}
    result = await run_to_end([str(hosts), "--no-ui", "--run-dir", str(tmp_path / "runs")],
                              tmp_path, fake, **env)
    assert result.code == 1, result.out[-3000:] + result.err[-3000:]
    assert "tfdist  | run failed: " in result.out
    failed = [line for line in result.out.splitlines() if " failed, exit code " in line]
    assert failed and all(" failed, exit code 0" not in line for line in failed)
    assert "lines:" in result.out  # "<task> exited with code N; its last K lines:"
    assert "Traceback" not in result.err


async def port_in_use_exits_2(tmp_path: Path, fake: bool) -> None:
    """A port in use: exit 2 naming host:port and the holder (this test process)."""
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        hosts = write_hosts(tmp_path / "hosts.yaml", ps=[f"localhost:{port}"])
        result = await run_to_end([str(hosts), "--no-ui", "--run-dir", str(tmp_path / "runs")],
                                  tmp_path, fake)
    assert result.code == 2, result.out + result.err
    assert f"error: localhost:{port} is in use by pid {os.getpid()}" in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "runs").exists()


async def signal_stops_everything(tmp_path: Path, fake: bool, sig: signal.Signals) -> None:
    """Ctrl-C / SIGTERM: every task stopped, exit 130 within 5 s. SIGKILL: the tasks still
    go away within 5 s (their stdin closes)."""
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"steps": 10_000_000})
    env = {"FAKE_FOREVER": "*"} if fake else {}
    async with controller([str(hosts), "--json", "--run-dir", str(tmp_path / "runs")], tmp_path,
                          fake, **env) as (process, tag):
        await read_json_until(process, all_running(["ps0", "worker0", "worker1"]), RUN_TIMEOUT[fake])
        assert len(survivors(tag)) == 3
        process.send_signal(sig)
        rest = asyncio.ensure_future(process.communicate())
        code = await asyncio.wait_for(process.wait(), STOP_WITHIN)
        out, _ = await rest
        left = await wait_no_survivors(tag, STOP_WITHIN)
        assert not left, f"trainer processes survived {sig.name}: {[p.pid for p in left]}"
        if sig is signal.SIGKILL:
            assert code == -signal.SIGKILL
            return
        assert code == 130
        final = json.loads(out.decode().splitlines()[-1])
        assert final["type"] == "run_finished"
        assert final["summary"]["outcome"] == "interrupted"
        assert final["summary"]["reason"] == f"interrupted by {sig.name}"
        assert {t["state"] for t in final["summary"]["tasks"]} == {"stopped"}


async def timeout_exits_3(tmp_path: Path, fake: bool) -> None:
    """--timeout: everything stopped, exit 3."""
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"steps": 10_000_000})
    env = {"FAKE_FOREVER": "*"} if fake else {}
    result = await run_to_end([str(hosts), "--no-ui", "--timeout", "3", "--run-dir",
                               str(tmp_path / "runs")], tmp_path, fake, **env)
    assert result.code == 3, result.out[-3000:] + result.err[-3000:]
    assert "tfdist  | run timeout: timed out after 3 s" in result.out


async def stopped_task_dies_with_controller(tmp_path: Path, fake: bool, sig: signal.Signals) -> None:
    """A task stopped with SIGSTOP (a hung GPU driver, a debugger) is stopped with the others
    on SIGTERM, and dies with its controller on SIGKILL: a stopped process acts on neither
    SIGTERM nor its stdin closing until it is continued."""
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"steps": 10_000_000})
    env = {"FAKE_FOREVER": "*"} if fake else {}
    async with controller([str(hosts), "--json", "--run-dir", str(tmp_path / "runs")], tmp_path,
                          fake, **env) as (process, tag):
        await read_json_until(process, all_running(["ps0", "worker0", "worker1"]), RUN_TIMEOUT[fake])
        (stopped,) = [p for p in survivors(tag)
                      if json.loads(p.environ()["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}]
        stopped.suspend()
        process.send_signal(sig)
        rest = asyncio.ensure_future(process.communicate())
        code = await asyncio.wait_for(process.wait(), STOP_WITHIN + 5)
        await rest
        left = await wait_no_survivors(tag, STOP_WITHIN)
        assert not left, f"trainer processes survived {sig.name}: {[(p.pid, p.status()) for p in left]}"
        assert code == (-signal.SIGKILL if sig is signal.SIGKILL else 130)
