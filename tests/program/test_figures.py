"""What the controller shows of a program that is not ours, without TensorFlow: only figures
it knows (no built-in trainer header, target, examples/s or traffic expectation), a task
ready once, no hint for a shutdown warning, TensorFlow's protobuf dumps folded away."""

from __future__ import annotations

from pathlib import Path

from trainer import protocol
from tui.config.cluster import ClusterConfig, Job, TaskSpec
from tui.config.load import load_config
from tui.core.hints import UNAVAILABLE, hint_for
from tui.core.progress import ProgressSnapshot, ProgressTracker
from tui.core.traffic import PsTraffic, TrafficSample, predicts_traffic, summarise
from tui.headless import _rate
from tui.plan.tasks import program_for
from tui.program.base import TaskProgram
from tui.program.metrics import LogMetrics
from tui.program.noise import NoiseFolder
from tui.program.user import ProgramReader

WORKER0 = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)


def program(tmp_path: Path, command: str, training: str = "{}") -> tuple[ClusterConfig, TaskProgram]:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "hosts.yaml").write_text(f"program: {{command: '{command}'}}\n"
                                         f"cluster: {{ps: [localhost:auto], worker: [localhost:auto]}}\n"
                                         f"training: {training}\n")
    config = load_config(tmp_path / "hosts.yaml")
    return config, program_for(config)


def test_the_header_and_target_are_the_programs_own(tmp_path: Path) -> None:
    config, own = program(tmp_path, "python train.py --sync={sync}")
    mode = config.training.mode.value
    assert own.describe(config.training) == f"running python train.py --sync={{sync}} ({mode})"
    assert own.progress_target(config.training) == 0  # it never said: not our default 1000
    config, told = program(tmp_path, "python train.py --steps={steps}", "{steps: 50}")
    assert told.describe(config.training) == "running python train.py --steps={steps} (50 steps)"
    assert told.progress_target(config.training) == 50


def test_the_rate_is_steps_per_second_without_a_batch_size() -> None:
    tracker = ProgressTracker(0)
    for t, step in ((0.0, 10), (2.0, 30)):
        tracker.update("worker0", protocol.Step(role="worker", index=0, global_step=step, local_step=step,
                                                loss=None, examples_per_sec=0.0, step_time=0.1), t)
    snapshot = tracker.snapshot()
    assert snapshot.steps_per_sec == 10.0 and _rate(snapshot) == "10.0 steps/s  "
    assert _rate(ProgressSnapshot.empty(0)) == ""  # nothing known: nothing shown, never "0.0 ex/s"


def test_a_task_under_the_shim_is_ready_once(tmp_path: Path) -> None:
    config, own = program(tmp_path, "python train.py")
    reader = own.reader(WORKER0, config.training)
    started = "I0000 00:00:1.0 1 grpc_server_lib.cc:467] Started server with target: grpc://localhost:2222"
    assert reader.read(started, 1.0) == []  # text: the shim's event says it
    ready = protocol.Ready(role="worker", index=0, pid=7, address="localhost:2222", tf_version="2.21.0")
    assert reader.read(ready.to_json(), 2.0) == [ready]
    # Without the shim TensorFlow's line is the only sign, taken once.
    unshimmed = ProgramReader(WORKER0, LogMetrics("worker", 0))
    (event,) = unshimmed.read(started, 1.0)
    assert isinstance(event, protocol.Ready) and event.address == "localhost:2222"
    assert unshimmed.read(started, 2.0) == []


def test_a_warning_at_shutdown_is_no_failure() -> None:
    warning = ("W0000 00:00:1795452453.528990   16598 master_session.cc:2166] UNAVAILABLE: "
               "recvmsg:Connection reset by peer")
    assert hint_for(warning) is None
    assert hint_for(warning.replace("W0000", "E0000", 1)) == UNAVAILABLE
    assert hint_for("tensorflow.python.framework.errors_impl.UnavailableError: Socket closed") == UNAVAILABLE


def test_traffic_is_expected_only_where_the_model_is_known() -> None:
    def placement(strategy: str) -> protocol.Placement:
        return protocol.Placement(role="worker", index=0, model="m", strategy=strategy, partitions=1,
                                  num_ps=1, variables=(), ps_bytes=(1000,))

    samples = [TrafficSample(t, step, (PsTraffic("ps0", 0.0, 0.0, sent, sent),))
               for t, step, sent in ((0.0, 1, 0), (1.0, 11, 50_000))]
    ours = summarise(samples, placement("greedy"))
    theirs = summarise(samples, placement("program"))
    assert ours is not None and theirs is not None
    assert ours.ps[0].expected_per_sec == 20_000.0 and "expected 19.5 KiB/s" in ours.lines()[0]
    assert theirs.ps[0].expected_per_sec is None and "expected not known" in theirs.lines()[0]
    assert predicts_traffic(placement("round_robin"))
    assert not predicts_traffic(placement("ParameterServerStrategy"))


def test_tensorflows_protobuf_dump_is_folded_to_its_first_line() -> None:
    lines = ["I0000 00:00:1.0 1 eager_service_impl.cc:355] SessionOptions: goo.gle/debugproto   ",
             "device_count {", '  key: "CPU"', "  value: 1", "}", "allow_soft_placement: true", "",
             "I0000 00:00:2.0 1 something.cc:1] next", "value: 3"]
    folder = NoiseFolder()
    assert [line for line in lines if not folder.is_noise(line)] == [lines[0], lines[-2], lines[-1]]
