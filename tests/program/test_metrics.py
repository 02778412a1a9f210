"""Progress read from log text: TensorFlow's standard lines, Keras bars, the user's patterns."""

from __future__ import annotations

import re

import pytest

from trainer import protocol
from tui.config.program_spec import MetricPattern
from tui.program.metrics import LogMetrics


def steps(events: list[protocol.Event]) -> list[protocol.Step]:
    return [e for e in events if isinstance(e, protocol.Step)]


@pytest.mark.parametrize(("line", "step", "loss"), [
    ("INFO:tensorflow:loss = 2.302, step = 101 (0.213 sec)", 101, 2.302),
    ("I1123 04:00:00.1 139 basic_session_run_hooks.py:262] loss = 1e-3, step = 5", 5, 0.001),
    ("loss = nan, step = 9 (1 sec)", 9, None),
    ("\x1b[32m  3/10\x1b[0m [=====>........................] - ETA: 1s - loss: 0.7512 - accuracy: 0.25",
     3, 0.7512),
    ("\r 1/10 [>....] - loss: 0.9\r 4/10 [=>...] - ETA: 0s - loss: 0.5 - acc: 0.5", 4, 0.5),
    ("\x1b[1m5/10\x1b[0m \x1b[32m━━━━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━\x1b[0m \x1b[1m0s\x1b[0m 9ms/step - "
     "accuracy: 0.6 - loss: 0.4", 5, 0.4),
])
def test_builtin_patterns(line: str, step: int, loss: float | None) -> None:
    (event, *_) = LogMetrics("worker", 1, target=50).read(line, 1.0)
    assert isinstance(event, protocol.Step)
    assert (event.task, event.global_step, event.loss, event.target) == ("worker1", step, loss, 50)


@pytest.mark.parametrize("line", ["", "\r\r", "Epoch 1/3", "global_step/sec: 3.5", "hello 12/10 world",
                                  "INFO:tensorflow:Saving checkpoints for 0 into /tmp/x."])
def test_other_lines_mean_nothing(line: str) -> None:
    assert LogMetrics("worker", 0).read(line, 1.0) == []


def test_rates_come_from_step_counter_lines_or_from_time_and_batch_size() -> None:
    metrics = LogMetrics("worker", 0, examples_per_step=32)
    first = steps(metrics.read("loss = 1.0, step = 100", 10.0))[0]
    assert first.examples_per_sec == 0.0  # nothing to measure against yet
    second = steps(metrics.read("loss = 0.9, step = 200", 12.0))[0]
    assert second.step_time == pytest.approx(0.02) and second.examples_per_sec == pytest.approx(1600)
    assert metrics.read("INFO:tensorflow:global_step/sec: 40", 12.5) == []
    third = steps(metrics.read("loss = 0.8, step = 300", 20.0))[0]
    assert third.examples_per_sec == pytest.approx(40 * 32)  # TensorFlow's own rate wins
    assert [s.local_step for s in (first, second, third)] == [1, 2, 3]
    assert steps(LogMetrics("worker", 0).read("loss = 1, step = 1", 0.0))[0].examples_per_sec == 0.0


def test_keras_steps_count_through_epochs_and_accuracy_is_the_trainings() -> None:
    metrics = LogMetrics("chief", 0)
    assert metrics.read("Epoch 1/2", 0.0) == []
    end_of_epoch = metrics.read("10/10 [==============================] - 1s - loss: 0.5", 1.0)
    assert steps(end_of_epoch)[0].global_step == 10
    assert metrics.read("Epoch 2/2", 1.0) == []
    events = metrics.read("\r 3/10 [=====>.....] - ETA: 1s - loss: 0.4 - accuracy: 0.9", 2.0)
    (step,) = events  # training progress: no eval event
    assert (step.global_step, step.accuracy, step.task) == (13, 0.9, "chief0")
    # An evaluator's bar is a held-out evaluation, at the run's step (its line names none).
    evaluator = LogMetrics("evaluator", 0, evaluates=True)
    (evaluation,) = evaluator.read("4/4 - 0s - loss: 0.5 - accuracy: 0.8", 3.0)
    assert isinstance(evaluation, protocol.Eval)
    assert (evaluation.accuracy, evaluation.loss, evaluation.global_step) == (0.8, 0.5, 0)


def test_user_patterns_come_first() -> None:
    pattern = MetricPattern(re.compile(r"Step: (?P<step>\d+).*Cost: (?P<loss>[0-9.]+)"
                                       r"(?:.*ex/s: (?P<examples_per_sec>[0-9.]+))?"))
    metrics = LogMetrics("worker", 0, patterns=[pattern], examples_per_step=8)
    (step,) = metrics.read("Step: 12, Cost: 0.25, ex/s: 640.5", 3.0)
    assert isinstance(step, protocol.Step)
    assert (step.global_step, step.loss, step.examples_per_sec) == (12, 0.25, 640.5)
    (later,) = metrics.read("Step: 14, Cost: 0.2", 4.0)
    assert isinstance(later, protocol.Step) and later.examples_per_sec == pytest.approx(16)
    accuracy = MetricPattern(re.compile(r"acc (?P<accuracy>[0-9.]+)"))
    accuracy_only = LogMetrics("worker", 0, patterns=[accuracy])
    assert accuracy_only.read("acc 0.5", 1.0) == []  # no step to put it at


@pytest.mark.parametrize("bars", [
    # verbose=1 (a line of \r updates per epoch) and verbose=2 (one line per epoch), tf_keras.
    ("\r1/4 [======>.......] - ETA: 0s - loss: 2.0\r4/4 [==============] - 1s 9ms/step - loss: 1.34",
     "\r1/2 [======>.......] - ETA: 0s - loss: 9.0\r2/2 [==============] - 0s 3ms/step - loss: 8.66"),
    ("4/4 - 1s - loss: 1.34 - 1s/epoch - 250ms/step", "2/2 - 0s - loss: 8.6600 - 0s/epoch - 3ms/step"),
])
def test_evaluate_after_fit_is_held_out_not_a_step(bars: tuple[str, str]) -> None:
    """``Model.evaluate``'s bar after ``fit`` (no ``Epoch`` line before it) is a held-out
    evaluation: no step, and its loss is not the training loss."""
    fit, evaluate = bars
    reader = LogMetrics("chief", 0)
    events = [*reader.read("Epoch 1/2", 1.0), *reader.read(fit, 2.0), *reader.read("Epoch 2/2", 3.0),
              *reader.read(fit, 4.0), *reader.read(evaluate, 5.0)]
    assert [(s.global_step, s.loss) for s in steps(events)] == [(4, 1.34), (8, 1.34)]
    (held_out,) = [e for e in events if isinstance(e, protocol.Eval)]
    assert (held_out.loss, held_out.accuracy, held_out.global_step) == (8.66, None, 0)
    # A new epoch after it is training again.
    assert steps(reader.read("Epoch 3/3", 6.0) + reader.read(fit, 7.0))[0].global_step == 12


def test_an_epochs_last_batch_drawn_again_is_training_not_an_evaluation() -> None:
    """Keras 3 draws an epoch's last batch twice: the batch's update, then the epoch's end
    (with ``val_`` figures when ``fit`` has validation data). Both are training: its loss and
    accuracy stay the training's, and no held-out figure is made of them; an ``evaluate``
    bar after them is still held-out."""
    last = "400/400 ━━━━━━━━━━━━━━━━━━━━ 0s 53ms/step - accuracy: 0.1000 - loss: 2.3033"
    reader = LogMetrics("worker", 0)
    end = last.replace("0s 53ms", "39s 81ms") + " - val_accuracy: 0.1004 - val_loss: 2.3041"
    events = [*reader.read("Epoch 1/2", 1.0), *reader.read(last, 2.0), *reader.read(end, 2.1),
              *reader.read("Epoch 2/2", 3.0), *reader.read(last, 4.0), *reader.read(last, 4.1)]
    assert not [e for e in events if isinstance(e, protocol.Eval)]
    assert {(s.global_step, s.loss, s.accuracy) for s in steps(events)} == {(400, 2.3033, 0.1),
                                                                              (800, 2.3033, 0.1)}
    (held_out,) = reader.read("10/10 ━━━━━━━━━━━━━━━━━━━━ 1s 5ms/step - accuracy: 0.0990 - loss: 2.3100", 5.0)
    assert isinstance(held_out, protocol.Eval) and (held_out.loss, held_out.accuracy) == (2.31, 0.099)
