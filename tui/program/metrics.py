"""Training progress read from log text, for what the shim does not see (and for programs
that are not Python): TensorFlow's standard lines, Keras progress bars, and the user's own
``metrics:`` patterns. Pure: lines in, :class:`trainer.protocol.Step` events out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainer import protocol
from tui.common.quick import maker
from tui.common.terminal import without_sequences
from tui.config.program_spec import MetricField, MetricPattern

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
#: ``INFO:tensorflow:global_step/sec: 12.3`` (StepCounterHook).
STEP_RATE = re.compile(rf"global_step/sec: (?P<rate>{_NUMBER})")
#: ``INFO:tensorflow:loss = 0.25, step = 120 (0.5 sec)`` (the LoggingTensorHook of Estimators
#: and MonitoredTrainingSession users).
LOSS_STEP = re.compile(rf"\bloss = (?P<loss>{_NUMBER}), step = (?P<step>\d+)")
#: ``Epoch 3/10`` (Keras).
KERAS_EPOCH = re.compile(r"^Epoch (?P<epoch>\d+)/(?P<epochs>\d+)\s*$")
#: `` 12/100 [==>....] - ETA: 3s - loss: 0.5 - accuracy: 0.8`` (Keras 2) or
#: ``12/100 ━━━━━━ 1s 9ms/step - accuracy: 0.8 - loss: 0.5`` (Keras 3).
KERAS_PROGRESS = re.compile(r"^\s*(?P<batch>\d+)/(?P<batches>\d+|Unknown)\s+(?:\[|━|\S*\s)")
#: Text one of the built-in patterns above needs ("/": a rate, a Keras bar): a line with none
#: of it (and no escape sequence that could hide it) holds no progress, and is passed over
#: with a few substring searches (a regex alternation costs three times more per line).
_MAYBE_PROGRESS = ("/", "loss = ", "Epoch ", "\x1b", "\x9b")
KERAS_METRIC = re.compile(rf"\b(?P<name>loss|acc|accuracy): (?P<value>{_NUMBER})")


_STEP, _LOSS, _ACCURACY, _EXAMPLES_PER_SEC = (field.value for field in (
    MetricField.STEP, MetricField.LOSS, MetricField.ACCURACY, MetricField.EXAMPLES_PER_SEC))


@dataclass
class _Keras:
    epoch: int = 1
    batches: int = 0
    last_batch: int = 0
    #: The epoch's bar reached its last batch, and no ``Epoch N/M`` line came since: a bar
    #: now is ``Model.evaluate``'s (or ``predict``'s) after ``fit``, not training.
    completed: bool = False
    #: The bar being read is such an evaluation's.
    evaluating: bool = False
    #: The training bar's last (loss, accuracy): Keras 3 draws an epoch's last batch twice
    #: (the batch's update, then the epoch's end), which is no new bar.
    last_metrics: tuple[float | None, float | None] = (None, None)


class LogMetrics:
    """Reads one task's log lines. A line may hold several ``\\r``-separated progress
    updates (Keras redraws its bar); the last one counts. ``examples_per_step``: what this
    task contributes per step of the steps its lines count, for examples/sec.

    What a training task's lines say is training progress: its accuracy (a Keras bar's) is
    the training accuracy of its ``step``. An evaluator's lines (``evaluates``) are held-out
    evaluations: ``eval`` events (at the step its line names, else 0: the run's step then),
    never steps. So is a training task's Keras bar that follows a finished epoch with no new
    ``Epoch`` line (``Model.evaluate`` after ``fit``): its loss is held-out, not training's."""

    def __init__(self, role: str, index: int, *, patterns: Sequence[MetricPattern] = (),
                 examples_per_step: float | None = None, target: int = 0,
                 evaluates: bool = False) -> None:
        self._role = role
        self._index = index
        self._patterns = tuple(patterns)
        #: Examples per counted step (the reader raises it to the whole batch once it learns
        #: that the task is TF2's coordinator).
        self.examples_per_step = examples_per_step
        self._evaluates = evaluates
        self._target = target
        self._keras = _Keras()
        self._local_steps = 0
        self._last: tuple[int, float] | None = None  # (step, time) of the last step event
        self._rate: float | None = None  # global steps/sec, when a line said so
        self._loss: float | None = None

    @property
    def clues(self) -> tuple[str, ...]:
        """Text a line with progress in it holds (one of them); empty when the program's own
        metric patterns may match anything, so that every line is read."""
        return () if self._patterns else _MAYBE_PROGRESS

    def read(self, line: str, now: float) -> list[protocol.Event]:
        """The step events ``line`` means (none for other text)."""
        if not self._patterns and not any(clue in line for clue in _MAYBE_PROGRESS):
            return []
        text = without_sequences(line).rstrip("\n")
        if "\r" in text:
            updates = [part for part in text.split("\r") if part.strip()]
            if not updates:
                return []
            text = updates[-1]
        elif not text.strip():
            return []
        step = self._parse(text)
        if step is None:
            return []
        global_step, loss, accuracy, examples_per_sec = step
        if self._evaluates:
            if accuracy is None:
                return []
            return [protocol.Eval(role=self._role, index=self._index, t=now, global_step=global_step or 0,
                                  accuracy=accuracy, loss=loss, examples=0)]
        if self._keras.evaluating:
            if loss is None and accuracy is None:
                return []
            # (Step 0: the run's step then, as an evaluator's.)
            return [protocol.Eval(role=self._role, index=self._index, t=now, global_step=0,
                                  accuracy=accuracy, loss=loss, examples=0)]
        if loss is not None:
            self._loss = loss
        if global_step is None:
            return []
        return [self._step(global_step, now, examples_per_sec, accuracy)]

    def _parse(self, text: str) -> tuple[int | None, float | None, float | None, float | None] | None:
        """(step, loss, accuracy, examples/sec) from one update, or None if it has none."""
        for pattern in self._patterns:
            match = pattern.regex.search(text)
            if match:
                # (A field's name is its group's: no MetricField made per group and line.)
                found = match.groupdict()
                return (_int(found.get(_STEP)), _float(found.get(_LOSS)), _float(found.get(_ACCURACY)),
                        _float(found.get(_EXAMPLES_PER_SEC)))
        if match := LOSS_STEP.search(text):
            return int(match["step"]), _float(match["loss"]), None, None
        if match := STEP_RATE.search(text):
            self._rate = _float(match["rate"])
            return None
        if match := KERAS_EPOCH.match(text):
            self._keras.epoch = int(match["epoch"])
            self._keras.completed = self._keras.evaluating = False
            return None
        if match := KERAS_PROGRESS.match(text):
            return self._keras_step(match, text)
        return None

    def _keras_step(self, match: re.Match[str], text: str) -> tuple[int | None, float | None, float | None,
                                                                     float | None]:
        keras = self._keras
        batch = int(match["batch"])
        metrics = {m["name"]: _float(m["value"]) for m in KERAS_METRIC.finditer(text)}
        loss, accuracy = metrics.get("loss"), metrics.get("accuracy", metrics.get("acc"))
        if keras.completed and not keras.evaluating and not _epoch_end(keras, batch, text, loss, accuracy):
            keras.evaluating = True  # a new bar after the epoch's last batch: an evaluation
        if keras.evaluating:
            return None, loss, accuracy, None
        if match["batches"].isdigit():
            keras.batches = int(match["batches"])
        keras.last_batch = batch
        keras.completed = keras.batches > 0 and batch >= keras.batches
        keras.last_metrics = (loss, accuracy)
        # Batches count from 1 in each epoch; the run's step counts through the epochs. (An
        # evaluator's bar counts its evaluation's batches: no training step.)
        step = (keras.epoch - 1) * keras.batches + batch if keras.batches else batch
        if self._evaluates:
            return None, loss, accuracy, None
        return step, loss, accuracy, None

    def _step(self, global_step: int, now: float, examples_per_sec: float | None,
              accuracy: float | None) -> protocol.Step:
        step_time = 0.0
        if self._last is not None and global_step > self._last[0] and now > self._last[1]:
            step_time = (now - self._last[1]) / (global_step - self._last[0])
        if examples_per_sec is None:
            rate = self._rate if self._rate is not None else (1 / step_time if step_time else None)
            per_step = self.examples_per_step
            examples_per_sec = rate * per_step if rate is not None and per_step else 0.0
        if self._last is None or global_step != self._last[0]:
            self._local_steps += 1
        self._last = (global_step, now)
        return _make_step(role=self._role, index=self._index, t=now, global_step=global_step,
                          local_step=self._local_steps, loss=self._loss, examples_per_sec=examples_per_sec,
                          step_time=step_time, target=self._target, accuracy=accuracy, coordinator=False,
                          by_worker=())


def _epoch_end(keras: _Keras, batch: int, text: str, loss: float | None, accuracy: float | None) -> bool:
    """Whether a bar at ``batch`` after the epoch's last batch is that epoch's end drawn again,
    not an evaluation: it names validation figures (``val_loss``: only ``fit`` has them), or
    it repeats the last batch with the same figures (Keras 3's finished bar)."""
    return "val_" in text or (batch == keras.last_batch and (loss, accuracy) == keras.last_metrics)


#: A step event made at once (one a line of a stepping task: tui.common.quick).
_make_step = maker(protocol.Step)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(text))
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None
