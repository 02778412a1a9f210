"""Pure pieces: launch plans (TF_CONFIG, argv, env), event records, progress folding,
descriptions."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.fakes import make_config
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.config.load import load_config
from tui.core.describe import describe_event
from tui.core.event_records import to_json, to_record
from tui.core.events import (
    Incident,
    IncidentKind,
    Level,
    Notice,
    RunFinished,
    RunOutcome,
    RunSummary,
    TaskOutput,
    TaskResult,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.exits import describe_exit
from tui.core.progress import ProgressTracker
from tui.core.task_state import TaskState
from tui.launch.lines import Stream
from tui.launch.owner import RUN_ID_ENV
from tui.launch.package import trainer_root
from tui.plan.tasks import plan_run


def test_tf_config_argv_and_env_of_each_task(tmp_path: Path) -> None:
    config = make_config(tmp_path, ports=[2222, None, None], steps=300, mode="sync")
    ports = {"ps0": 2222, "worker0": 3000, "worker1": 3001}
    plans = plan_run(config, config.training, ports, "run-1")
    assert [p.name for p in plans] == ["ps0", "worker0", "worker1"]
    worker1 = plans[2]
    assert json.loads(worker1.tf_config) == {
        "cluster": {"ps": ["localhost:2222"], "worker": ["localhost:3000", "localhost:3001"]},
        "task": {"type": "worker", "index": 1},
    }
    assert worker1.argv[:4] == (sys.executable, "-m", "trainer", "--hold")
    assert worker1.argv[4:] == tuple(config.training.to_argv())
    unheld = plan_run(config, config.training, ports, "run-1", hold=False)[2]
    assert unheld.argv[3:] == tuple(config.training.to_argv())
    assert worker1.env["TF_CONFIG"] == worker1.tf_config
    assert worker1.env["PYTHONUNBUFFERED"] == "1"
    assert worker1.env[RUN_ID_ENV] == "run-1"
    assert worker1.env["PYTHONPATH"].split(":")[0] == str(trainer_root())
    assert worker1.cwd is None
    assert shlex.split(worker1.command) == list(worker1.argv)
    assert worker1.shell_command.startswith("TF_CONFIG='{\"cluster\"")


def test_host_env_gpus_and_an_explicit_local_python(tmp_path: Path) -> None:
    tasks = (TaskSpec(Job.PS, 0, "localhost", 1), TaskSpec(Job.WORKER, 0, "localhost", 2, gpus=2))
    hosts = {"localhost": HostSpec(name="localhost", address="localhost", python="/opt/py",
                                   env={"CUDA_VISIBLE_DEVICES": "0", "TF_CONFIG": "ignored"})}
    config = ClusterConfig(path=tmp_path / "h.yaml", hosts=hosts, tasks=tasks,
                           training=TrainingSettings())
    ps0, worker0 = plan_run(config, config.training, {"ps0": 1, "worker0": 2}, "r")
    assert ps0.argv[0] == "/opt/py"
    assert ps0.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert json.loads(ps0.env["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}
    assert worker0.argv[worker0.argv.index("--gpus") + 1] == "2"
    assert ps0.argv[ps0.argv.index("--gpus") + 1] == "1"


def checkpoint_flag(argv: tuple[str, ...]) -> str | None:
    return argv[argv.index("--checkpoint-dir") + 1] if "--checkpoint-dir" in argv else None


def test_checkpoints_go_into_the_run_directory_unless_settings_say_where(tmp_path: Path) -> None:
    tasks = (TaskSpec(Job.PS, 0, "gpu1", 1), TaskSpec(Job.WORKER, 0, "localhost", 2))
    hosts = {"gpu1": HostSpec(name="gpu1", address="10.0.0.1")}
    config = ClusterConfig(path=tmp_path / "h.yaml", hosts=hosts, tasks=tasks, training=TrainingSettings())
    ports = {"ps0": 1, "worker0": 2}
    remote, local = plan_run(config, config.training, ports, "r7", run_dir=Path("runs/r7"))
    assert checkpoint_flag(local.argv) == str(Path("runs/r7").resolve() / "checkpoints")
    assert checkpoint_flag(remote.argv) == "runs/r7/checkpoints"  # under the host's workdir
    chosen = config.training.replace(checkpoint_dir="~/ckpt")
    assert {checkpoint_flag(p.argv) for p in plan_run(config, chosen, ports, "r7", run_dir=Path("x"))} \
        == {"~/ckpt"}
    assert {checkpoint_flag(p.argv) for p in plan_run(config, config.training, ports, "r7")} == {None}
    summary_dirs = [p.argv[p.argv.index("--summary-dir") + 1] for p in (remote, local)]
    assert summary_dirs == ["runs/r7/tensorboard", str(Path("runs/r7").resolve() / "tensorboard")]


def test_records_are_json_with_a_type_and_plain_values() -> None:
    step = protocol.Step(role="worker", index=1, global_step=5, local_step=3, loss=float("nan"),
                         examples_per_sec=1.5, step_time=0.1, t=1.0)
    records = [
        to_record(TaskStateChanged(task="ps0", old=TaskState.STARTING, new=TaskState.FAILED,
                                   pid=7, exit_code=2, reason="exited with code 2", t=1.0)),
        next(TaskOutput(task="ps0", stream=Stream.STDERR, lines=("\x1b[1mhi\x00",), t=1.0).records()),
        to_record(TrainerEvent(task="worker1", event=step, t=2.0)),
        to_record(Notice(level=Level.WARNING, text="careful", t=3.0)),
    ]
    assert records[0] == {"type": "task_state", "task": "ps0", "old": "starting", "new": "failed",
                          "pid": 7, "exit_code": 2, "reason": "exited with code 2", "restarts": 0,
                          "t": 1.0}
    assert records[1]["stream"] == "stderr" and records[1]["text"] == "\x1b[1mhi\x00"
    assert records[2]["event"] == json.loads(step.to_json())
    assert records[2]["event"]["loss"] is None
    assert records[3]["level"] == "warning"
    summary = RunSummary(run_id="r", run_dir=Path("/runs/r"), outcome=RunOutcome.FAILED, reason="x",
                         started_at=0.0, wall_time=float("inf"), global_step=1, target=2,
                         final_loss=None, final_accuracy=0.5,
                         tasks=(TaskResult(name="ps0", state=TaskState.FAILED, exit_code=-9,
                                           last_lines=("a", "b")),))
    line = to_json(RunFinished(summary=summary, t=4.0))
    decoded = json.loads(line)
    assert decoded["summary"]["run_dir"] == "/runs/r"
    assert decoded["summary"]["wall_time"] is None
    assert decoded["summary"]["tasks"][0]["last_lines"] == ["a", "b"]
    assert summary.failed_tasks == summary.tasks


def test_task_state_properties() -> None:
    assert [s for s in TaskState if s.is_active] == [TaskState.STARTING, TaskState.RUNNING,
                                                     TaskState.STOPPING, TaskState.UNREACHABLE]
    assert [s for s in TaskState if s.is_finished] == [TaskState.SUCCEEDED, TaskState.FAILED,
                                                       TaskState.STOPPED]


def test_progress_sums_running_workers_and_prefers_the_chiefs_final_numbers() -> None:
    tracker = ProgressTracker(target=100)

    def step(index: int, global_step: int, loss: float, rate: float) -> protocol.Step:
        return protocol.Step(role="worker", index=index, global_step=global_step, local_step=1,
                             loss=loss, examples_per_sec=rate, step_time=0.1, target=200)

    assert tracker.update("worker0", step(0, 10, 1.0, 100.0), t=0.0)
    assert tracker.update("worker10", step(10, 12, 0.9, 50.0), t=1.0)
    assert tracker.update("worker2", step(2, 11, 0.8, 25.0), t=2.0)
    snap = tracker.snapshot()
    assert (snap.global_step, snap.target, snap.examples_per_sec, snap.loss) == (12, 200, 175.0, 0.8)
    assert [w.task for w in snap.workers] == ["worker0", "worker2", "worker10"]
    assert snap.fraction == 12 / 200
    assert snap.eta_seconds == (200 - 12) / ((12 - 10) / 2.0)  # at the recent step rate
    assert tracker.worker_exited("worker10") and not tracker.worker_exited("worker10")
    assert tracker.snapshot().examples_per_sec == 125.0
    tracker.update("worker0", protocol.Eval(role="worker", index=0, global_step=20, accuracy=0.7,
                                            loss=0.5, examples=10), t=3.0)
    assert tracker.final_accuracy == 0.7 and tracker.final_loss == 0.8
    tracker.update("worker2", protocol.Done(role="worker", index=2, reason="target_reached",
                                            global_step=200, loss=0.4), t=4.0)
    tracker.update("worker0", protocol.Done(role="worker", index=0, reason="target_reached",
                                            global_step=200, loss=0.3, accuracy=0.9), t=5.0)
    assert (tracker.final_loss, tracker.final_accuracy) == (0.3, 0.9)
    assert tracker.snapshot().global_step == 200


def test_descriptions() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(2) == "exited with code 2"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-200) == "was killed by signal 200"
    error = protocol.Error(role="ps", index=0, type="usage", message="--steps: bad")
    assert describe_event(error) == "error: usage: --steps: bad"
    step = protocol.Step(role="worker", index=0, global_step=5, local_step=5, loss=None,
                         examples_per_sec=10.0, step_time=0.1, target=10)
    assert describe_event(step) == "step 5/10 loss n/a 10.0 ex/s"


def test_progress_takes_the_chiefs_initialized_step_even_when_lower() -> None:
    tracker = ProgressTracker(target=100)
    tracker.update("worker1", protocol.Step(role="worker", index=1, global_step=90, local_step=90,
                                            loss=1.0, examples_per_sec=1.0, step_time=0.1), t=0.0)
    # After a cluster restart the chief restored an older checkpoint.
    tracker.update("worker0", protocol.Initialized(role="worker", index=0, global_step=60, seconds=1.0,
                                                   is_chief=True), t=1.0)
    assert tracker.snapshot().global_step == 60 and tracker.snapshot().eta_seconds is None
    assert not tracker.update("worker1", protocol.Initialized(role="worker", index=1, global_step=50,
                                                              seconds=1.0), t=2.0)
    assert tracker.snapshot().global_step == 60


def test_incident_lines() -> None:
    cluster = Incident(kind=IncidentKind.CLUSTER_RESTART, task="ps1", reason="exited with code 1",
                       global_step=1234, resumed_step=1000, t=0.0)
    assert cluster.steps_lost == 234
    assert cluster.describe() == ("ps1 exited with code 1 at step 1234: cluster restarted, resumed "
                                  "from step 1000 (234 steps lost)")
    worker = Incident(kind=IncidentKind.TASK_RESTART, task="worker2", reason="was killed by SIGKILL",
                      global_step=50, t=0.0)
    assert worker.steps_lost is None
    assert worker.describe() == "worker2 was killed by SIGKILL at step 50: restarted, did not rejoin"


def test_a_localhost_entry_without_python_keeps_the_controllers_interpreter(tmp_path: Path) -> None:
    """hosts: localhost: env: {...} alone used to switch local tasks to python3 from PATH."""
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  localhost:\n    env: {A: '1'}\n  gpu1: {}\n"
                    "cluster:\n  ps: [localhost:1]\n  worker: [gpu1:2]\n")
    config = load_config(path)
    ps0, worker0 = plan_run(config, config.training, {"ps0": 1, "worker0": 2}, "r",
                            local_python="/the/controllers/python")
    assert ps0.argv[0] == "/the/controllers/python" and ps0.env["A"] == "1"
    assert worker0.argv[0] == "python3"  # a remote host without python: takes PATH's


def test_a_big_run_is_planned_with_each_address_made_a_few_times_not_once_per_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task's TF_CONFIG and ``{ps_hosts}``/``{worker_hosts}`` hold the whole cluster:
    its addresses are made once a run, not once a task (256 tasks made 65,536 x 4)."""
    path = tmp_path / "hosts.yaml"
    path.write_text("program:\n  command: python train.py --ps={ps_hosts} --workers={worker_hosts}\n"
                    "  shim: false\n"
                    "cluster:\n  ps: [localhost:auto, localhost:auto]\n"
                    f"  worker: [{', '.join(['localhost:auto'] * 62)}]\n")
    (tmp_path / "train.py").write_text("")
    config = load_config(path)
    ports = {task.name: 3000 + number for number, task in enumerate(config.tasks)}
    made = []
    address_of = ClusterConfig.address_of
    monkeypatch.setattr(ClusterConfig, "address_of",
                        lambda self, *args: made.append(args) or address_of(self, *args))
    plans = plan_run(config, config.training, ports, "run-1")
    assert len(made) <= 2 * len(config.tasks)
    workers = ",".join(f"localhost:{3002 + n}" for n in range(62))
    for plan in plans:
        assert json.loads(plan.tf_config)["cluster"] == {"ps": ["localhost:3000", "localhost:3001"],
                                                         "worker": workers.split(",")}
        assert plan.argv[-2:] == ("--ps=localhost:3000,localhost:3001", f"--workers={workers}")
