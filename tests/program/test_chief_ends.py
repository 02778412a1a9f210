"""A cluster with a ``chief`` job (TF2's coordinator) through the headless controller, with
plain scripts: the chief's exit 0 ends the run, and the workers, evaluator and ps serving it
are ended at once and counted as succeeded; a chief that fails is judged by the restart
policy (its restart is no ending) and fails the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.program.helpers import Finished, load, processes_of_runs, program_folder, run_program
from tui.common.exit_codes import ExitCode
from tui.core.events import Notice, RunOutcome, TaskStateChanged
from tui.program.end_rules import HANG_AFTER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SERVERS = ("worker0", "worker1", "evaluator0", "ps0")


def hosts_yaml(chief_exit: int, extra: str = "") -> str:
    return f"""\
        program:
          command: >-
            python coordinated.py --job={{job}} --address={{address}} --workers={{worker_hosts}}
            --exit={chief_exit}
        cluster: {{ps: [localhost:auto], chief: [localhost:auto],
                   worker: [localhost:auto, localhost:auto], evaluator: [localhost:auto]}}
        {extra}
        """


async def a_succeeded_run(tmp_path: Path, yaml: str, runs: Path) -> tuple[Finished, dict[str, Any],
                                                                         dict[str, dict[str, Any]]]:
    """A headless run of coordinated.py as ``yaml`` says, which must succeed: the run, its
    summary.json, and each task's part of it by name."""
    run = await run_program(load(program_folder(tmp_path, "coordinated.py", yaml)), runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "succeeded"
    return run, summary, {t["name"]: t for t in summary["tasks"]}


async def test_the_chiefs_exit_0_ends_the_others_at_once_as_succeeded(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = await run_program(load(program_folder(tmp_path, "coordinated.py", hosts_yaml(0))), runs)

    assert run.code is ExitCode.OK, run.out[-3000:]
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == "succeeded"
    assert {t["name"]: t["state"] for t in summary["tasks"]} == dict.fromkeys(
        ("chief0", *SERVERS), "succeeded")
    reasons = {t["name"]: t["reason"] for t in summary["tasks"]}
    assert reasons["chief0"] == ""
    for name in SERVERS:
        assert reasons[name] == "ended by the controller: chief0 finished (counted as succeeded)"
    notices = [e.text for e in run.events if isinstance(e, Notice)]
    assert "chief0 finished: ended worker0, worker1, evaluator0, ps0 (counted as succeeded)" in notices
    exits = {e.task: e.t for e in run.events if isinstance(e, TaskStateChanged) and e.exit_code is not None}
    # No target step is known here, so nothing but the chief's exit could have ended them.
    assert max(exits.values()) - exits["chief0"] < HANG_AFTER / 2
    assert not processes_of_runs(runs)


async def test_a_failing_chief_is_restarted_and_then_fails_the_run(tmp_path: Path) -> None:
    restart = "restart: {policy: on-failure, max_restarts: 1, backoff: 0.2}"
    runs = tmp_path / "runs"
    run = await run_program(load(program_folder(tmp_path, "coordinated.py", hosts_yaml(1, restart))),
                            runs)

    assert run.code is ExitCode.TASK_FAILED, run.out[-3000:]
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == RunOutcome.FAILED.value
    tasks = {t["name"]: t for t in summary["tasks"]}
    assert (tasks["chief0"]["state"], tasks["chief0"]["restarts"]) == ("failed", 1)
    assert {name: tasks[name]["state"] for name in SERVERS} == dict.fromkeys(SERVERS, "stopped")
    assert not any("chief0 finished" in e.text for e in run.events if isinstance(e, Notice))
    assert not processes_of_runs(runs)


async def test_an_evaluator_that_fails_never_ends_training(tmp_path: Path) -> None:
    """An evaluator only watches training: up once it runs (the cluster is "up" without
    waiting for it), restarted by default, and once it may not be restarted again left
    failed with a warning while the chief trains on; the run succeeds. Its accuracy is a
    held-out evaluation."""
    command = ("python coordinated.py --job={job} --address={address} --workers={worker_hosts} "
               "--evaluator-exit=1 --chief-seconds=4")
    yaml = f"""\
        program: {{command: '{command}'}}
        cluster: {{ps: [localhost:auto], chief: [localhost:auto],
                   worker: [localhost:auto, localhost:auto], evaluator: [localhost:auto]}}
        restart: {{max_restarts: 1, backoff: 0.1}}
        """
    runs = tmp_path / "runs"
    run, summary, tasks = await a_succeeded_run(tmp_path, yaml, runs)
    assert tasks["chief0"]["state"] == "succeeded"
    assert (tasks["evaluator0"]["state"], tasks["evaluator0"]["restarts"]) == ("failed", 1)
    assert "before reporting ready" not in tasks["evaluator0"]["reason"]
    assert "evaluator0" in summary["reason"] and "training went on" in summary["reason"]
    notices = [e for e in run.events if isinstance(e, Notice)]
    assert any(n.task == "evaluator0" and "training goes on without evaluations" in n.text for n in notices)
    assert summary["final_accuracy"] == 0.75
    # "All tasks up" came before the chief finished, not when the evaluator exited.
    (up,) = [n for n in notices if n.text.startswith("all 5 tasks up")]
    chief_done = next(e.t for e in run.events if isinstance(e, TaskStateChanged) and e.task == "chief0"
                      and e.exit_code is not None)
    assert up.t < chief_done
    assert not processes_of_runs(runs)


async def test_a_worker_in_backoff_when_the_chief_succeeds_is_stopped_not_failed(tmp_path: Path) -> None:
    """By the roles' rules: worker1 is SIGKILLed mid-training and waits out its restart
    backoff; the chief finishes meanwhile and exits 0. The run succeeded; worker1's restart
    is called off and it is counted as stopped, with why."""
    command = ("python coordinated.py --job={job} --index={index} --address={address} "
               "--workers={worker_hosts} --sigkill-worker=1 --chief-seconds=4")
    yaml = f"""\
        program: {{command: '{command}'}}
        cluster: {{ps: [localhost:auto], chief: [localhost:auto], worker: [localhost:auto, localhost:auto]}}
        restart: {{policy: on-failure, max_restarts: 3, backoff: 60}}
        """
    runs = tmp_path / "runs"
    run, summary, tasks = await a_succeeded_run(tmp_path, yaml, runs)
    assert tasks["chief0"]["state"] == tasks["worker0"]["state"] == tasks["ps0"]["state"] == "succeeded"
    assert tasks["worker1"]["state"] == "stopped"
    assert tasks["worker1"]["reason"] == ("restart called off: chief0 finished while it waited to restart "
                                          "(it was killed by SIGKILL)")
    assert "worker1: restart called off" in summary["reason"]
    # It was in its backoff when the chief finished, and never started again.
    changes = [e for e in run.events if isinstance(e, TaskStateChanged) and e.task == "worker1"]
    assert [e.new.value for e in changes][-2:] == ["backoff", "stopped"]
    assert sum(e.new.value == "starting" for e in changes) == 1
    # Never restarted: no claim that it "did not rejoin".
    (incident,) = summary["incidents"]
    assert (incident["task"], incident["restarted"], incident["resumed_step"]) == ("worker1", False, None)
    assert ("worker1 was killed by SIGKILL at step 0: not restarted (the run's training was over "
            "first)") in run.out
    assert "rejoin" not in run.out
    assert not processes_of_runs(runs)


#: coordinated.py as the chief of a TF2 ParameterServerStrategy program: the controller knows
#: one by the strategy's construction in its source, here in a branch never taken (no
#: TensorFlow in these tests).
AS_PSS = """\
import runpy
import sys
from pathlib import Path

if sys.argv[-1] == "--build-the-strategy":
    import tensorflow as tf
    tf.distribute.experimental.ParameterServerStrategy(None)
runpy.run_path(str(Path(__file__).with_name("coordinated.py")), run_name="__main__")
"""


async def test_a_tf2_coordinators_worker_lost_for_good_leaves_the_run_to_the_chief(tmp_path: Path) -> None:
    """Under the default policy (no restarts) a worker SIGKILLed mid-training under a TF2
    coordinator does not end the run: the coordinator reschedules its functions on the other
    workers, as TensorFlow documents; the chief's exit 0 ends the run, succeeded, with the
    lost worker failed and said in the run's reason (it had been failed at once, the chief
    stopped mid-training)."""
    command = ("python as_pss.py --job={job} --index={index} --address={address} "
               "--workers={worker_hosts} --sigkill-worker=1 --chief-seconds=4")
    yaml = f"""\
        program: {{command: '{command}'}}
        cluster: {{ps: [localhost:auto], chief: [localhost:auto], worker: [localhost:auto, localhost:auto]}}
        """
    runs = tmp_path / "runs"
    path = program_folder(tmp_path, "coordinated.py", yaml)
    (path.parent / "as_pss.py").write_text(AS_PSS)
    run = await run_program(load(path), runs)

    assert run.code is ExitCode.OK, run.out[-3000:]
    (run_dir,) = runs.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    tasks = {t["name"]: t for t in summary["tasks"]}
    assert summary["outcome"] == "succeeded", summary
    assert tasks["chief0"]["state"] == tasks["worker0"]["state"] == "succeeded"
    assert (tasks["worker1"]["state"], tasks["worker1"]["restarts"]) == ("failed", 0)
    assert "killed by SIGKILL" in tasks["worker1"]["reason"]
    assert "(the coordinator went on without it)" in summary["reason"]
    notices = [e for e in run.events if isinstance(e, Notice)]
    left = "not restarted (restart policy): the coordinator carries on with the other workers"
    assert any(n.task == "worker1" and n.text.endswith(left) for n in notices)
    # The chief trained on to its own end: nothing stopped it.
    assert "chief done, exit 0" in run.out
    assert not processes_of_runs(runs)
