"""What the controller does with a chief that neither moves nor exits after the target step,
with real processes (a TensorFlow-free toy cluster, so that only the controller's rule is
timed): one that blocks without using the CPU is hung (the sync chief of tensorflow#13779)
and is ended within 10 s, counted as succeeded; one that computes (an export after training)
is working and is left to finish, by the hang rule and the stall watchdog alike. The real
sync chief's hang is ended in tests/program/test_examples.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.program.helpers import Finished, load, processes_of_runs, program_folder, run_program
from tests.program.test_program_runs import STEP_PATTERN
from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.config.restart_policy import StallPolicy
from tui.core.events import ControllerEvent, Notice, RunFinished, TaskResult, TaskStateChanged, TrainerEvent
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.program.end_rules import HANG_AFTER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: Longer than the hang rule's quiet time, so that a rule that took the export for a hang
#: would end it before it is done.
WORK_SECONDS = HANG_AFTER + 6
STALL_TIMEOUT = HANG_AFTER + 3


async def run_toy(tmp_path: Path, after: str) -> Finished:
    folder = tmp_path / after.split(":")[0]
    folder.mkdir()
    config = load(program_folder(folder, "toy_cluster.py", f"""\
        program:
          command: >-
            python toy_cluster.py --job={{job}} --index={{index}} --address={{address}}
            --ps={{ps_hosts}} --steps={{steps}} --ckpt={{checkpoint_dir}} --after={after}
          shim: false
          metrics: [{STEP_PATTERN}]
        cluster: {{ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}}
        training: {{steps: 40}}
        """))
    # A stall watchdog that fails the run after 8 quiet seconds: the export prints nothing for
    # longer, and its CPU use must count as a sign of life there too.
    options = SupervisorOptions(stall_timeout=STALL_TIMEOUT, on_stall=StallPolicy.FAIL)
    return await run_program(config, folder / "runs", Supervisor(config, runs_root=folder / "runs",
                                                                  options=options))


def summary_tasks(run: Finished) -> tuple[TaskResult, ...]:
    (finished,) = [e for e in run.events if isinstance(e, RunFinished)]
    return tuple(finished.summary.tasks)


def last_step_time(events: list[ControllerEvent]) -> float:
    steps = [(e.t, e.event.global_step) for e in events
             if isinstance(e, TrainerEvent) and isinstance(e.event, protocol.Step)]
    last = max(step for _, step in steps)
    return min(t for t, step in steps if step == last)


async def test_a_blocked_chief_is_ended_and_a_computing_one_is_left_to_finish(tmp_path: Path) -> None:
    hung, working = await asyncio.gather(run_toy(tmp_path, "hang"), run_toy(tmp_path, f"work:{WORK_SECONDS}"))

    for run in (hung, working):
        assert run.code is ExitCode.OK, run.out[-3000:]
        assert all(t.state is TaskState.SUCCEEDED for t in summary_tasks(run)), summary_tasks(run)

    (chief,) = [t for t in summary_tasks(hung) if t.name == "worker0"]
    assert chief.reason.startswith("ended by the controller: no progress for"), chief
    ended_at = max(e.t for e in hung.events if isinstance(e, RunFinished))
    assert ended_at - last_step_time(hung.events) < 10.0

    (chief,) = [t for t in summary_tasks(working) if t.name == "worker0"]
    assert (chief.exit_code, chief.reason) == (0, ""), chief  # it exited by itself
    (export,) = (tmp_path / "work" / "runs").glob("*/checkpoints/exported")
    assert int(export.read_text()) > 0
    notices = [e.text for e in working.events if isinstance(e, Notice) and e.task == "worker0"]
    assert sum("still working" in text for text in notices) == 1, notices
    assert "worker0 | info: the target step 40 was reached; still working" in working.out

    assert not processes_of_runs(tmp_path / "hang" / "runs")
    assert not processes_of_runs(tmp_path / "work" / "runs")


LEFT_BEHIND = """\
import socket, sys, time
job, index, address = sys.argv[1], int(sys.argv[2]), sys.argv[3]
host, port = address.rsplit(":", 1)
listener = socket.create_server((host, int(port)))  # its server is up: the task is ready
if job == "worker" and index == 0:
    time.sleep(1.0)  # the chief trains and finishes
    print("chief done", flush=True)
    sys.exit(0)
while True:  # worker1 waits for a session the chief no longer serves; the ps serves
    time.sleep(0.5)
"""


async def test_a_worker_left_behind_after_the_chief_finished_does_not_hold_the_run(tmp_path: Path) -> None:
    """No target known (the command has no {steps}), a non-chief that never steps: once the
    chief has exited 0 it is judged like a worker past the target, ended and counted as
    succeeded within 10 s."""
    folder = tmp_path / "left"
    folder.mkdir()
    (folder / "left.py").write_text(LEFT_BEHIND)
    (folder / "hosts.yaml").write_text(
        "program: {command: 'python left.py {job} {index} {address}'}\n"
        "cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}\n")
    run = await run_program(load(folder / "hosts.yaml"), folder / "runs")
    assert run.code is ExitCode.OK, run.out[-3000:]
    tasks = {t.name: t for t in summary_tasks(run)}
    assert all(t.state is TaskState.SUCCEEDED for t in tasks.values()), tasks
    assert tasks["worker1"].reason.startswith("ended by the controller: no progress for"), tasks["worker1"]
    assert "after worker0 finished" in tasks["worker1"].reason
    exits = {e.task: e.t for e in run.events if isinstance(e, TaskStateChanged) and e.new.is_finished}
    assert exits["worker1"] - exits["worker0"] < 10.0
    assert not processes_of_runs(folder / "runs")
