"""Known-failure hints: every pattern of tui.core.hints on realistic TensorFlow/OS output, their
delivery by the supervisor (once per launch, in the TaskResult, as a TaskHint event), the
headless summary, and one real-trainer run with a missing dataset."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fakes import FakeClock, FakeLauncher, Recorder, make_config, start_all
from trainer.settings import Dataset
from tui.common.exit_codes import ExitCode
from tui.config.cluster import RestartMode, RestartPolicy
from tui.core import hints
from tui.core.events import RunOutcome, RunSummary, TaskHint, TaskOutput, TaskResult
from tui.core.hints import HINTS, hint_for, hint_for_exit
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.headless import Printer, run_headless
from tui.launch.lines import Stream

S = TaskState

# (line as a task prints it, the hint it must get)
RECOGNISED = [
    ("E1121 grpc_server_lib.cc:489] Could not start gRPC server: UNKNOWN: Failed to add port to "
     "server: Address already in use", hints.PORT_IN_USE),
    ("OSError: [Errno 98] Address already in use", hints.PORT_IN_USE),
    ("bind: EADDRINUSE", hints.PORT_IN_USE),
    ("tensorflow.python.framework.errors_impl.UnavailableError: {{function_node __inference}} "
     "failed to connect to all addresses", hints.UNAVAILABLE),
    ('{"event":"error","v":1,"role":"worker","index":0,"type":"UnavailableError","message":"Socket '
     'closed"}', hints.UNAVAILABLE),
    ("Additional GRPC error information: UNAVAILABLE: Connection refused", hints.UNAVAILABLE),
    ("I1121 12:00:00.000 master.cc:268] CreateSession still waiting for response from worker: "
     "/job:ps/replica:0/task:0", hints.CREATE_SESSION),
    ("Killed", hints.OUT_OF_MEMORY),
    ("  Killed  ", hints.OUT_OF_MEMORY),
    ("Out of memory: Killed process 4242 (python) total-vm:1234kB", hints.OUT_OF_MEMORY),
    ("ResourceExhaustedError: OOM when allocating tensor with shape[1000000,1000]", hints.OUT_OF_MEMORY),
    ("MemoryError", hints.OUT_OF_MEMORY),
    ("terminate called after throwing an instance of 'std::bad_alloc'", hints.OUT_OF_MEMORY),
    ("OSError: [Errno 12] Cannot allocate memory", hints.OUT_OF_MEMORY),
    ("trainer: error: dataset mnist not found (looked in /nope, /root/.keras/datasets/mnist.npz); "
     "pass --data-path", hints.DATASET_MISSING),
    ('{"event":"error","v":1,"role":"worker","index":1,"type":"usage","message":"dataset cifar10 '
     'not found (looked in /x)"}', hints.DATASET_MISSING),
    ("tfdist shim: worker1 serves (server.join()), and the cluster has no chief to coordinate it",
     hints.NO_COORDINATOR),
    # Keras 3's model.fit under ParameterServerStrategy, TF 2.21 (the last line of its traceback).
    ("ValueError: To use this dataset, you need to pass this dataset to "
     "ClusterCoordinator.create_per_worker_dataset.", hints.PER_WORKER_DATASET),
    ("ModuleNotFoundError: No module named 'tensorflow_datasets'", hints.MODULE_MISSING),
    ("ModuleNotFoundError: No module named 'wandb.sdk'; 'wandb' is not a package", hints.MODULE_MISSING),
]

NOT_RECOGNISED = [
    "",
    "worker0: listening on localhost:2222",
    "step 100 loss 0.25",
    "the task was killed by the controller",   # "killed" inside a sentence is not the shell's note
    "Killed process list: none",
    "dataset digits loaded: 1797 examples",
    "checkpoint not found, starting fresh",     # "not found" without a dataset
    '{"event":"step","v":1,"role":"worker","index":0,"global_step":5}',
    "unavailable features: none",               # lower case is not gRPC's status
    "TF-TRT Warning: No module named 'tensorrt'; TensorRT is off",  # told, not raised: it runs on
]


@pytest.mark.parametrize(("line", "hint"), RECOGNISED, ids=lambda v: v[:40] if isinstance(v, str) else "")
def test_known_failures_are_recognised(line: str, hint: str) -> None:
    assert hint_for(line) == hint


@pytest.mark.parametrize("line", NOT_RECOGNISED)
def test_ordinary_output_gets_no_hint(line: str) -> None:
    assert hint_for(line) is None


def test_every_entry_of_the_table_is_exercised_and_immutable() -> None:
    assert {hint for _, hint in RECOGNISED} == {known.hint for known in HINTS}
    with pytest.raises(dataclasses.FrozenInstanceError):
        HINTS[0].hint = "x"  # type: ignore[misc]


LINES = st.sampled_from([line for line, _ in RECOGNISED] + NOT_RECOGNISED)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), LINES), max_size=4).map("".join), st.booleans())
def test_a_failures_clues_are_in_every_line_its_pattern_matches(text: str, swap: bool) -> None:
    """The clues only pass lines over: wherever a pattern matches, one of its clues is there."""
    text = text.swapcase() if swap else text
    for known in HINTS:
        assert known.found_in(text, text.casefold()) == (known.pattern.search(text) is not None), \
            (known.name, text)


def test_only_the_head_of_a_huge_line_is_scanned() -> None:
    assert hint_for("x" * 10_000 + " Address already in use") == hints.PORT_IN_USE
    assert hint_for("x" * (hints.SCAN_CHARS + 1) + " Address already in use") is None


@pytest.mark.parametrize("code", [-signal.SIGKILL, 128 + signal.SIGKILL])
def test_a_sigkill_exit_suggests_out_of_memory(code: int) -> None:
    assert hint_for_exit(code) == "killed by SIGKILL: out of memory?"


@pytest.mark.parametrize("code", [0, 1, 2, 3, -signal.SIGTERM, 143, -signal.SIGSEGV])
def test_other_exits_get_no_hint(code: int) -> None:
    assert hint_for_exit(code) is None


def test_the_module_stays_free_of_ui_and_tensorflow() -> None:
    source = Path(hints.__file__).read_text()
    assert "textual" not in source and "tensorflow" not in source.replace("TensorFlow", "")


# -- the supervisor --------------------------------------------------------------------------


def make(tmp_path: Path, **kwargs: object) -> tuple[Supervisor, FakeLauncher, Recorder, FakeClock]:
    launcher, recorder, clock = FakeLauncher(), Recorder(), FakeClock()
    supervisor = Supervisor(make_config(tmp_path), runs_root=tmp_path / "runs", launcher=launcher,
                            clock=clock, options=SupervisorOptions(**kwargs))  # type: ignore[arg-type]
    supervisor.subscribe(recorder)
    return supervisor, launcher, recorder, clock


def hint_notices(recorder: Recorder) -> list[tuple[str, str]]:
    return [(h.task, h.hint) for h in recorder.of(TaskHint)]


async def test_the_first_hint_of_a_task_is_noticed_once_and_kept_in_its_result(tmp_path: Path) -> None:
    supervisor, launcher, recorder, _clock = make(tmp_path)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.ready()
    chief = await launcher.started("worker0")
    chief.say("CreateSession still waiting for response from worker: /job:ps", Stream.STDERR)
    chief.say("CreateSession still waiting for response from worker: /job:ps", Stream.STDERR)
    # While a peer is still starting, waiting for it is no failure: the hint is held back...
    await recorder.wait_for(lambda e: isinstance(e, TaskOutput) and "CreateSession" in e.lines[0])
    assert hint_notices(recorder) == []
    chief.exit(1)  # ...and given once the task dies of it
    summary = await supervisor.wait()
    assert hint_notices(recorder) == [("worker0", hints.CREATE_SESSION)]
    by_name = {t.name: t for t in summary.tasks}
    assert by_name["worker0"].hint == hints.CREATE_SESSION
    assert by_name["ps0"].hint == by_name["worker1"].hint == ""


async def test_a_task_killed_by_sigkill_gets_the_exit_hint(tmp_path: Path) -> None:
    supervisor, launcher, recorder, _clock = make(tmp_path)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    processes["worker1"].exit(-signal.SIGKILL)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert hint_notices(recorder) == [("worker1", hints.SIGKILL_HINT)]
    # The others were stopped by the controller: no hint for them, even if they died by SIGKILL.
    assert {t.name: t.hint for t in summary.tasks} == {"ps0": "", "worker0": "",
                                                        "worker1": hints.SIGKILL_HINT}


async def test_a_task_the_controller_kills_gets_no_oom_hint(tmp_path: Path) -> None:
    supervisor, launcher, recorder, clock = make(tmp_path, grace=3.0)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.ignore_term = True  # only SIGKILL stops it: exit -9
    ps0.ready()
    for name in ("worker0", "worker1"):
        (await launcher.started(name)).ready()
    await recorder.state("worker1", S.RUNNING)
    stopping = asyncio.ensure_future(supervisor.stop_all())
    await recorder.state("worker0", S.STOPPED)
    await recorder.state("worker1", S.STOPPED)
    await clock.sleeping(3.0)  # now only ps0's grace period is left: it ignored SIGTERM
    clock.advance(3.0)
    summary = await stopping
    assert summary is not None and {t.exit_code for t in summary.tasks if t.name == "ps0"} == {-9}
    assert hint_notices(recorder) == []
    assert all(t.hint == "" for t in summary.tasks)


async def test_a_restarted_task_starts_its_launch_without_a_hint(tmp_path: Path) -> None:
    supervisor, launcher, recorder, clock = make(tmp_path)
    config = supervisor.config
    policy = RestartPolicy(policy=RestartMode.ON_FAILURE, max_restarts=1, backoff=2.0)
    supervisor._config = dataclasses.replace(config, restart=policy)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    processes["worker1"].say("MemoryError")
    processes["worker1"].exit(1)
    await clock.sleeping(2.0)
    clock.advance(2.0)
    again = await launcher.started("worker1", launch=2)
    again.ready()
    again.say("MemoryError")  # the new launch: noticed again
    again.exit(1)
    summary = await supervisor.wait()
    assert [task for task, _ in hint_notices(recorder)] == ["worker1", "worker1"]
    assert {t.name: t.hint for t in summary.tasks}["worker1"] == hints.OUT_OF_MEMORY


# -- the headless summary --------------------------------------------------------------------


def test_the_headless_summary_shows_the_hint_under_the_failed_task() -> None:
    summary = RunSummary(
        run_id="r1", run_dir=Path("/runs/r1"), outcome=RunOutcome.FAILED, reason="worker1 failed",
        started_at=0.0, wall_time=1.0, global_step=0, target=100, final_loss=None, final_accuracy=None,
        tasks=(TaskResult(name="ps0", state=S.STOPPED, exit_code=-15, hint=hints.UNAVAILABLE),
               TaskResult(name="worker1", state=S.FAILED, exit_code=2, hint=hints.DATASET_MISSING)))
    out = io.StringIO()
    Printer(out, colour=False).summary(summary)
    lines = out.getvalue().splitlines()
    row = lines.index("  worker1  failed, exit code 2")
    assert lines[row + 1] == f"           hint: {hints.DATASET_MISSING}"
    assert hints.UNAVAILABLE not in out.getvalue()  # a stopped task's hint is not its failure


# -- the real trainer --------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_real_trainer_with_a_missing_dataset_shows_the_hint(tmp_path: Path) -> None:
    from tests.support import assert_no_trainers_left

    config = make_config(tmp_path, dataset=Dataset.MNIST, data_path=str(tmp_path / "no-such-dir"),
                         steps=100)
    out, err = io.StringIO(), io.StringIO()
    options = RunOptions(config=config, runs_root=tmp_path / "runs")
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", options=SupervisorOptions(grace=2.0))
    code = await run_headless(options, supervisor=supervisor, out=out, err=err, handle_signals=False)
    text = out.getvalue()
    assert code is ExitCode.TASK_FAILED, text + err.getvalue()
    assert f"hint: {hints.DATASET_MISSING}" in text
    lines = text.splitlines()
    failed_rows = [i for i, line in enumerate(lines) if " failed, exit code 2" in line]
    assert failed_rows and all(lines[i + 1].strip() == f"hint: {hints.DATASET_MISSING}" for i in failed_rows)
    (run_dir,) = (tmp_path / "runs").iterdir()
    recorded = json.loads((run_dir / "summary.json").read_text())
    assert hints.DATASET_MISSING in {t["hint"] for t in recorded["tasks"]}
    assert_no_trainers_left(tmp_path / "runs")


def test_a_worker_that_only_serves_without_a_chief_is_named(monkeypatch, capsys) -> None:
    """A TF2 ParameterServerStrategy cluster without a chief: the shim says so when a worker
    enters server.join(), and the hint names the missing coordinator (not "restart it")."""
    from trainer.shim import hooks
    from trainer.shim.state import STATE
    from tui.core.hints import NO_COORDINATOR

    monkeypatch.setattr(STATE, "role", "worker")
    monkeypatch.setattr(STATE, "cluster", {"ps": ["a:1"], "worker": ["a:2", "a:3"]})
    hooks._check_coordinated()
    (line,) = capsys.readouterr().out.splitlines()
    assert hint_for(line) == NO_COORDINATOR
    monkeypatch.setattr(STATE, "cluster", {"ps": ["a:1"], "worker": ["a:2"], "chief": ["a:4"]})
    hooks._check_coordinated()
    monkeypatch.setattr(STATE, "role", "ps")
    monkeypatch.setattr(STATE, "cluster", {"ps": ["a:1"], "worker": ["a:2"]})
    hooks._check_coordinated()
    assert capsys.readouterr().out == ""  # coordinated, or a ps: nothing to say
