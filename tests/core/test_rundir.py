"""The run directory: complete, parseable, never truncated."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support import fill, small_filesystem
from tests.support.fakes import FakeClock, FakeLauncher, Recorder, make_config
from trainer import protocol
from tui.core.events import ControllerEvent, RunOutcome, RunSummary, TaskOutput, TaskStateChanged
from tui.core.rundir import RunDirectory, WriteFailure, new_run_id
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState
from tui.launch.lines import Stream


def test_run_ids_sort_by_time_and_are_unique() -> None:
    first, second = new_run_id(1_700_000_000.0), new_run_id(1_700_000_000.0)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", first)
    assert first != second
    assert new_run_id(1_800_000_000.0) > first


def test_log_lines_are_marked_by_stream_and_long_lines_by_continuation(tmp_path: Path) -> None:
    directory = RunDirectory.create(tmp_path, "r")
    events: list[ControllerEvent] = [
        TaskStateChanged(task="ps0", old=TaskState.PENDING, new=TaskState.STARTING, pid=9, t=0.0),
        TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("a" * 10,), partial=True, t=0.0),
        TaskOutput(task="ps0", stream=Stream.STDERR, lines=("oops",), t=0.0),
        TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("b" * 3,), continued=True, t=0.0),
        TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("\x00\udcff after",), t=0.0),
    ]
    for event in events:
        directory.record(event)
    directory.close()
    directory.record(events[0])  # ignored after close
    lines = [line.split(" ", 1)[1] for line in (tmp_path / "r/logs/ps0.log").read_text().splitlines()]
    assert lines == ["ctl | pending -> starting (pid 9)", "out | " + "a" * 10, "err | oops",
                     "out+ | bbb", "out | \x00? after"]
    records = [json.loads(line) for line in (tmp_path / "r/events.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records] == ["task_state"]


async def test_a_run_leaves_a_complete_directory(tmp_path: Path) -> None:
    config = make_config(tmp_path, num_workers=1, ports=[2222, None])
    launcher, recorder = FakeLauncher(), Recorder()
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=FakeClock())
    supervisor.subscribe(recorder)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.say("hello from ps0")
    ps0.ready()
    worker0 = await launcher.started("worker0")
    worker0.ready()
    worker0.say("x" * 2_000_000, Stream.STDERR)
    worker0.done(global_step=10, loss=0.5, accuracy=0.75)
    worker0.exit(0)
    ps0.exit(0)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED

    run_dir = summary.run_dir
    assert run_dir.parent == tmp_path / "runs" and run_dir.name == supervisor.run_id
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml", "controller.lock", "events.jsonl", "logs", "summary.json", "tasks"]

    resolved = yaml.safe_load((run_dir / "config.yaml").read_text())
    worker_port = resolved["cluster"]["worker"][0].rsplit(":", 1)[1]
    assert resolved["cluster"] == {"ps": ["localhost:2222"], "worker": [f"localhost:{worker_port}"]}
    assert resolved["training"]["steps"] == config.training.steps
    assert resolved["restart"]["worker"]["policy"] == "never"

    task = json.loads((run_dir / "tasks/worker0.json").read_text())
    assert task["tf_config"]["task"] == {"type": "worker", "index": 0}
    assert task["argv"] == list(launcher.processes["worker0"][0].argv)
    assert task["port"] == int(worker_port)
    # Its share of this machine (tui.plan.allocation), and the variables that give it.
    assert task["share"]["cores"] >= 1 and task["share"]["text"].startswith(f"{task['share']['cores']} core")
    assert task["env"]["TF_NUM_INTRAOP_THREADS"] == str(task["share"]["intra_op"])
    assert json.loads((run_dir / "tasks/ps0.json").read_text())["env"]["CUDA_VISIBLE_DEVICES"] == ""

    ps_log = (run_dir / "logs/ps0.log").read_text()
    assert "out | hello from ps0" in ps_log and '"event":"ready"' in ps_log
    worker_log = (run_dir / "logs/worker0.log").read_text()
    assert "err | " + "x" * 2_000_000 + "\n" in worker_log  # never truncated

    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "task_output" not in kinds  # output lives in the logs
    trainer_events = [r["event"]["event"] for r in records if r["type"] == "trainer_event"]
    assert trainer_events == ["loaded", "ready", "loaded", "ready", "done"]
    assert len([r for r in records if r["type"] == "task_state"]) == 6

    saved = json.loads((run_dir / "summary.json").read_text())
    assert saved["outcome"] == "succeeded"
    assert (saved["final_loss"], saved["final_accuracy"]) == (0.5, 0.75)
    assert [t["exit_code"] for t in saved["tasks"]] == [0, 0]


def test_an_existing_run_directory_is_never_reused(tmp_path: Path) -> None:
    RunDirectory.create(tmp_path, "same")
    with pytest.raises(FileExistsError):
        RunDirectory.create(tmp_path, "same")


def test_protocol_events_round_trip_through_events_jsonl(tmp_path: Path) -> None:
    from tui.core.events import TrainerEvent

    directory = RunDirectory.create(tmp_path, "r")
    event = protocol.Checkpoint(role="worker", index=0, action="saved", global_step=3, path="/c")
    directory.record(TrainerEvent(task="worker0", event=event, t=1.0))
    directory.close()
    (record,) = [json.loads(line) for line in (tmp_path / "r/events.jsonl").read_text().splitlines()]
    assert protocol.parse_event(json.dumps(record["event"])) == event


# --- A full disk ------------------------------------------------------------------------------


def _output(text: str) -> TaskOutput:
    return TaskOutput(task="worker0", stream=Stream.STDOUT, lines=(text,), t=0.0)


@pytest.mark.asyncio
async def test_a_full_disk_is_one_clear_failure_and_flushing_goes_on(tmp_path: Path) -> None:
    """On a real filesystem that fills up: the failure names the file and the OS's reason,
    is reported once, nothing raises (flush_periodically keeps running), and summary.json
    is whole or absent, never empty."""
    with small_filesystem(tmp_path / "disk") as disk:
        directory = RunDirectory.create(disk, "r")
        failures: list[WriteFailure] = []
        directory.on_failure = failures.append
        directory.record(_output("before the disk fills"))
        directory.flush()
        summary = RunSummary(run_id="r", run_dir=directory.path, outcome=RunOutcome.SUCCEEDED, reason="",
                             started_at=0.0, wall_time=1.0, global_step=1, target=1, final_loss=None,
                             final_accuracy=None, tasks=())
        directory.write_summary(summary)
        whole = (directory.path / "summary.json").read_text()
        fill(disk)
        clock = FakeClock()
        flusher = asyncio.ensure_future(directory.flush_periodically(clock, interval=1.0))
        for _ in range(3):
            for _ in range(100):
                directory.record(_output("x" * 100))
            await clock.sleeping(1.0)
            clock.advance(1.0)
        assert not flusher.done()  # still flushing, no "Task exception was never retrieved"
        directory.write_summary(dataclasses.replace(summary, outcome=RunOutcome.FAILED))
        assert (directory.path / "summary.json").read_text() == whole  # old one intact
        assert not list(directory.path.glob(".*.tmp"))
        directory.close()
        await asyncio.wait_for(flusher, 5.0)
    assert failures == [WriteFailure(directory.path / "logs/worker0.log", "No space left on device")]
    assert directory.failure == failures[0]
    assert str(failures[0]) == f"cannot write {directory.path}/logs/worker0.log: No space left on device"


def test_summary_json_is_written_atomically(tmp_path: Path) -> None:
    directory = RunDirectory.create(tmp_path, "r")
    summary = RunSummary(run_id="r", run_dir=directory.path, outcome=RunOutcome.SUCCEEDED, reason="",
                         started_at=0.0, wall_time=1.0, global_step=1, target=1, final_loss=0.5,
                         final_accuracy=None, tasks=())
    directory.write_summary(summary)
    (directory.path / "summary.json").chmod(0o444)  # replaced by rename, not rewritten in place
    directory.write_summary(dataclasses.replace(summary, reason="again"))
    assert json.loads((directory.path / "summary.json").read_text())["reason"] == "again"
    assert directory.failure is None


def test_a_flooding_tasks_log_is_capped_with_a_marker(tmp_path: Path) -> None:
    directory = RunDirectory.create(tmp_path, "r", max_log_chars=1000)
    for n in range(50):
        directory.record(TaskOutput.line("worker0", f"{n:03d} " + "x" * 80, t=0.0))
    directory.record(TaskStateChanged(task="worker0", old=TaskState.RUNNING, new=TaskState.SUCCEEDED,
                                      exit_code=0, t=1.0))
    directory.close()
    lines = (tmp_path / "r" / "logs" / "worker0.log").read_text().splitlines()
    kept = [line for line in lines if " out | " in line]
    assert 0 < len(kept) < 50 and sum(len(line) + 1 for line in kept) <= 1000
    assert "log capped: 1,000 characters of output kept" in lines[len(kept)]
    assert " ctl | running -> succeeded" in lines[-1]  # the controller's marks still come
    assert len(lines) == len(kept) + 2
