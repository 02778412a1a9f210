"""TF2 programs' figures, without TensorFlow: ParameterServerStrategy's coordinator counts the
whole cluster's steps (its examples/s are never divided among the workers again, and each
worker gets the part the coordinator saw it run); one step unit (batches) whether the shim or
a Keras bar says it; Keras' accuracy is training accuracy, an evaluator's is held-out."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer import protocol
from tui.config.cluster import ClusterConfig, Job, TaskSpec
from tui.config.load import load_config
from tui.core.progress import ProgressTracker
from tui.headless import task_rates
from tui.plan.tasks import program_for
from tui.program.base import TaskProgram

CHIEF0 = TaskSpec(job=Job.CHIEF, index=0, host="localhost", port=None)
EVALUATOR0 = TaskSpec(job=Job.EVALUATOR, index=0, host="localhost", port=None)
BATCH = 256


def pss_program(tmp_path: Path) -> tuple[ClusterConfig, TaskProgram]:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "hosts.yaml").write_text(
        f"program: {{command: 'python train.py', batch_size: {BATCH}}}\n"
        "cluster: {ps: [localhost:auto], chief: [localhost:auto], worker: [localhost:auto, localhost:auto],"
        " evaluator: [localhost:auto]}\n")
    config = load_config(tmp_path / "hosts.yaml")
    return config, program_for(config)


def shim_step(step: float, step_time: float, by_worker: tuple[int, ...] = ()) -> str:
    return protocol.Step(role="chief", index=0, global_step=int(step), local_step=int(step), loss=None,
                         examples_per_sec=0.0, step_time=step_time, coordinator=True,
                         by_worker=by_worker).to_json()


def test_the_coordinators_rate_is_the_clusters(tmp_path: Path) -> None:
    config, program = pss_program(tmp_path)
    reader = program.reader(CHIEF0, config.training)
    initialized = protocol.Initialized(role="chief", index=0, global_step=0, seconds=3.0, is_chief=True,
                                       coordinator=True)
    assert reader.read(initialized.to_json(), 1.0) == [initialized]
    (step,) = reader.read(shim_step(100, 0.0104, (30, 70)), 2.0)
    assert isinstance(step, protocol.Step)
    # 256 examples a batch at 0.0104 s a batch: 24,615 ex/s (not a third of it).
    assert step.examples_per_sec == pytest.approx(BATCH / 0.0104)
    # A Keras line of the same task: the same unit (batches), the shim's rate, not its own.
    reader.read("Epoch 1/3", 2.5)
    (keras,) = reader.read("100/100 - 1s - loss: 0.6 - accuracy: 0.7 - 1s/epoch - 10ms/step", 3.0)
    assert isinstance(keras, protocol.Step)
    assert (keras.global_step, keras.coordinator) == (100, True)
    assert keras.examples_per_sec == step.examples_per_sec
    assert (keras.loss, keras.accuracy) == (0.6, 0.7)


def test_the_workers_get_the_parts_they_ran_and_the_total_is_counted_once() -> None:
    tracker = ProgressTracker(0)
    def step(t: float, global_step: int, rate: float, by_worker: tuple[int, ...]) -> None:
        tracker.update("chief0", protocol.Step(role="chief", index=0, global_step=global_step,
                                               local_step=global_step, loss=None, examples_per_sec=rate,
                                               step_time=0.01, coordinator=True, by_worker=by_worker), t)
    step(1.0, 10, 6000.0, (1, 0))
    step(2.0, 50, 6000.0, (3, 2))   # since the last: worker0 2, worker1 2
    snapshot = tracker.snapshot()
    assert snapshot.examples_per_sec == pytest.approx(6000.0)
    rates = {w.task: w.examples_per_sec for w in snapshot.workers}
    assert rates == pytest.approx({"chief0": 6000.0, "worker0": 3000.0, "worker1": 3000.0})
    assert task_rates(snapshot) == "chief0 (coordinator) 6000.0, worker0 3000.0, worker1 3000.0"
    # A step without counts (a Keras line between the shim's) keeps the split.
    step(2.5, 60, 8000.0, ())
    rates = {w.task: w.examples_per_sec for w in tracker.snapshot().workers}
    assert rates["worker1"] == pytest.approx(4000.0)
    tracker.worker_exited("chief0")
    assert tracker.snapshot().workers == ()


def test_keras_accuracy_is_training_and_an_evaluators_is_held_out(tmp_path: Path) -> None:
    config, program = pss_program(tmp_path)
    chief, evaluator = program.reader(CHIEF0, config.training), program.reader(EVALUATOR0, config.training)
    tracker = ProgressTracker(0)
    chief.read("Epoch 1/2", 0.0)
    for event in chief.read("50/50 - 2s - loss: 0.6912 - accuracy: 0.5578 - 2s/epoch - 32ms/step", 1.0):
        assert not isinstance(event, protocol.Eval)  # training, not "-- eval ... (0 examples)"
        tracker.update("chief0", event, 1.0)
    (held_out,) = evaluator.read("4/4 - 1s - loss: 0.6528 - accuracy: 0.6445 - 1s/epoch - 251ms/step", 2.0)
    assert isinstance(held_out, protocol.Eval) and (held_out.accuracy, held_out.loss) == (0.6445, 0.6528)
    tracker.update("evaluator0", held_out, 2.0)
    snapshot = tracker.snapshot()
    assert (snapshot.accuracy, snapshot.train_accuracy) == (0.6445, 0.5578)
    # The evaluator's loss is not the training loss, and it is no worker.
    assert (snapshot.loss, snapshot.eval_loss) == (0.6912, 0.6528)
    assert [w.task for w in snapshot.workers] == ["chief0"]
    assert (tracker.final_accuracy, tracker.final_train_accuracy) == (0.6445, 0.5578)
