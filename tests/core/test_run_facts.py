"""One truth on both screens: the same event streams, of every style of program, rendered by
headless and by the app's dashboard, say the same facts: the target only when there is one,
the rate in the same unit and value, each task's rate (TF2's coordinator as such), training
accuracy apart from held-out accuracy, and the settings in use (a user's command that uses
none is shown as itself)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.state import Dashboard
from tui.app.widgets import progress_text, status_text
from tui.config.cluster import ClusterConfig, Job
from tui.config.load import load_config
from tui.core.events import ControllerEvent, ProgressUpdate, RunStarted, TrainerEvent
from tui.core.progress import RATE_STALE_MIN, ProgressTracker
from tui.core.run_facts import RunFacts
from tui.headless import Printer
from tui.plan.tasks import TaskInfo, program_for


def step_line(role: str, index: int, step: int, step_time: float, *, examples: float = 0.0,
              coordinator: bool = False, by_worker: tuple[int, ...] = ()) -> str:
    return protocol.Step(role=role, index=index, global_step=step, local_step=step, loss=None,
                         examples_per_sec=examples, step_time=step_time, coordinator=coordinator,
                         by_worker=by_worker).to_json()


def coordinator_lines(keras: bool) -> list[tuple[str, str]]:
    """TF2's coordinator under the shim: 20 batches a second of 256 examples, split 1:3."""
    lines = [("chief0", protocol.Initialized(role="chief", index=0, global_step=0, seconds=2.0,
                                             is_chief=True, coordinator=True).to_json())]
    for second in range(1, 4):
        lines.append(("chief0", step_line("chief", 0, 20 * second, 0.05, coordinator=True,
                                          by_worker=(second, 3 * second))))
    if keras:
        lines += [("chief0", "Epoch 1/1"), ("chief0", "60/60 - 3s - loss: 0.6000 - accuracy: 0.7000")]
        lines.append(("evaluator0", "4/4 - 0s - loss: 0.5500 - accuracy: 0.7500"))
    else:
        lines.append(("chief0", "step 60 loss 0.6000 accuracy 0.7000"))
    return lines


@dataclass(frozen=True)
class Style:
    """A style of program: hosts.yaml's ``program:`` (empty: the built-in trainer), its cluster,
    what its tasks print, and the facts to see."""

    name: str
    program: str
    cluster: str
    lines: list[tuple[str, str]]
    target: int | None
    unit: str
    rate: float
    train_accuracy: float | None = None
    accuracy: float | None = None
    coordinator: bool = False
    #: train.py's text (the config check and the no-shim reader read it).
    source: str = ""


TF1 = "cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}"
PSS = ("cluster: {ps: [localhost:auto, localhost:auto], chief: [localhost:auto], "
       "worker: [localhost:auto, localhost:auto], evaluator: [localhost:auto]}")
METRICS = "metrics: ['step (?P<step>\\d+) loss (?P<loss>[0-9.]+) accuracy (?P<accuracy>[0-9.]+)']"

STYLES = [
    Style("built-in", "", TF1 + "\ntraining: {steps: 300}",
          [("worker0", step_line("worker", 0, 100, 0.01, examples=3200.0)),
           ("worker1", step_line("worker", 1, 120, 0.01, examples=3000.0)),
           ("worker0", protocol.Eval(role="worker", index=0, global_step=120, accuracy=0.9, loss=0.3,
                                     examples=1000).to_json())],
          target=300, unit="ex/s", rate=6200.0, accuracy=0.9),
    # TF1, async, every worker's shim reads the global step: each a half of 32 x 50 steps/s.
    Style("TF1 script", "command: python train.py --steps={steps}\n  batch_size: 32",
          TF1 + "\ntraining: {steps: 200}",
          [("worker0", step_line("worker", 0, 50, 0.02)), ("worker1", step_line("worker", 1, 60, 0.02))],
          target=200, unit="ex/s", rate=1600.0),
    Style("-m package", "command: python -m pkg.train\n  batch_size: 32", TF1,
          [("worker0", step_line("worker", 0, 50, 0.02)), ("worker1", step_line("worker", 1, 60, 0.02))],
          target=None, unit="ex/s", rate=1600.0),
    Style("TF2 custom loop", f"command: python train.py --steps={{steps}}\n  batch_size: 256\n  {METRICS}",
          PSS + "\ntraining: {steps: 100}", coordinator_lines(keras=False),
          target=100, unit="ex/s", rate=256 / 0.05, train_accuracy=0.7, coordinator=True),
    Style("Keras fit, steps_per_execution", "command: python train.py\n  batch_size: 256", PSS,
          coordinator_lines(keras=True), target=None, unit="ex/s", rate=256 / 0.05, train_accuracy=0.7,
          accuracy=0.75, coordinator=True),
    # Without the shim: the Keras bar's batches at the pace of its lines, each task's share.
    Style("Keras fit, no shim", "command: python train.py\n  batch_size: 64\n  shim: false", TF1,
          [("worker0", "Epoch 1/1"), ("worker0", "10/100 [==>...] - ETA: 9s - loss: 0.7 - accuracy: 0.6"),
           ("worker0", "30/100 [=====>...] - ETA: 7s - loss: 0.6 - accuracy: 0.7")],
          target=None, unit="ex/s", rate=20 / 1.0 * 32, train_accuracy=0.7),
    Style("no shim, metrics:", f"command: ./train.sh\n  shim: false\n  {METRICS}", TF1,
          [("worker0", "step 10 loss 0.9 accuracy 0.5"), ("worker0", "step 30 loss 0.8 accuracy 0.6")],
          target=None, unit="steps/s", rate=20.0, train_accuracy=0.6),
    # TF2 without the shim: only the chief prints, the cluster's steps, each the whole batch
    # (20 steps/s of 256), never divided by the 3 tasks that train.
    Style("PSS custom loop, no shim, metrics:",
          f"command: python train.py\n  batch_size: 256\n  shim: false\n  {METRICS}", PSS,
          [("chief0", "step 10 loss 0.9 accuracy 0.5"), ("chief0", "step 30 loss 0.8 accuracy 0.6")],
          target=None, unit="ex/s", rate=20 * 256.0, train_accuracy=0.6,
          source="import tensorflow as tf\nstrategy = tf.distribute.ParameterServerStrategy(resolver)\n"),
]


def config_of(tmp_path: Path, style: Style) -> ClusterConfig:
    (tmp_path / "train.py").write_text(style.source)
    (tmp_path / "train.sh").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("")
    program = f"program:\n  {style.program}\n" if style.program else ""
    (tmp_path / "hosts.yaml").write_text(dedent(program) + style.cluster + "\n")
    return load_config(tmp_path / "hosts.yaml")


def events_of(config: ClusterConfig, style: Style) -> list[ControllerEvent]:
    """What the core publishes for ``style``'s lines: its readers, its progress tracker."""
    program = program_for(config)
    settings = config.training
    facts = RunFacts.of(program, settings)
    tasks = tuple(TaskInfo(name=t.name, job=t.job, index=t.index, host="localhost", port=2000 + n)
                  for n, t in enumerate(config.tasks))
    events: list[ControllerEvent] = [RunStarted(run_id="r1", run_dir=Path("/tmp/r1"), tasks=tasks,
                                                settings=settings, description=facts.description,
                                                facts=facts, t=100.0)]
    readers = {t.name: program.reader(t, settings) for t in config.tasks}
    tracker = ProgressTracker(facts.target)
    for number, (task, line) in enumerate(style.lines):
        now = 101.0 + number
        for event in readers[task].read(line, now):
            if isinstance(event, protocol.Eval) and not event.global_step:
                event = protocol.Eval(role=event.role, index=event.index, global_step=tracker.global_step,
                                      accuracy=event.accuracy, loss=event.loss, examples=event.examples)
            changed = tracker.update(task, event, now)
            events.append(TrainerEvent(task=task, event=event, t=now))
            if changed:
                events.append(ProgressUpdate(progress=tracker.snapshot(), t=now))
    return events


def number_before(unit: str, text: str) -> float:
    match = re.search(rf"([\d,]+(?:\.\d+)?) {re.escape(unit)}", text)
    assert match, f"no rate in {unit} in {text!r}"
    return float(match[1].replace(",", ""))


@pytest.mark.parametrize("style", STYLES, ids=[s.name for s in STYLES])
def test_headless_and_the_app_say_the_same(tmp_path: Path, style: Style) -> None:
    config = config_of(tmp_path, style)
    events = events_of(config, style)
    out = io.StringIO()
    printer = Printer(out, colour=False)
    dashboard = Dashboard(config.training, clock=lambda: 110.0)
    for event in events:
        printer.handle(event)
        dashboard.apply(event)
    printer.progress_line()
    headless = out.getvalue()
    (progress,) = [line for line in headless.splitlines() if re.match(r"tfdist +\| step ", line)]
    app = progress_text(dashboard.figures).plain
    status = status_text(dashboard, config.training).plain

    # The target only when there is one: never "/ 1 100%".
    if style.target is None:
        assert "/" not in progress.split("  ")[1] and "%" not in progress, progress
        assert " / " not in app and "%" not in app, app
    else:
        assert f"/{style.target} (" in progress and f"/ {style.target:,}" in app
    # The rate: the same unit and value (never 0 ex/s without a batch size).
    assert number_before(style.unit, progress) == pytest.approx(style.rate, rel=0.01)
    assert number_before(style.unit, app) == pytest.approx(style.rate, rel=0.01)
    assert not re.search(r"(?<![\d,.])0(\.0)? ex/s", progress + app)
    assert style.unit == "ex/s" or "ex/s" not in progress + app
    if style.coordinator:
        # The chief coordinates; the workers did the work, 1:3.
        assert "chief0 (coordinator)" in progress
        share = style.rate / 4
        assert f"worker0 {share:.1f}" in progress and f"worker1 {3 * share:.1f}" in progress
        rows = dashboard.rows
        assert rows["chief0"].coordinates and rows["worker1"].examples_per_sec == pytest.approx(3 * share)
    elif style.source:
        # Without the shim nobody says which worker ran what: the chief's is the cluster's rate.
        assert "chief0 (coordinator)" in progress and dashboard.rows["chief0"].coordinates
    # Training accuracy is never shown as held-out, in both.
    for name, value in (("training accuracy", style.train_accuracy), ("held-out accuracy", style.accuracy)):
        if value is None:
            assert name not in progress and name not in app
        else:
            assert f"{name} {value:.4f}" in progress and f"{name} {value:.3f}" in app
    # The settings in use: a user's program shows only those its command uses.
    facts = dashboard.facts
    assert facts is not None
    if style.program:
        assert facts.description in headless and facts.description in status
        assert "greedy" not in status and "partitions" not in status
    else:
        for text in ("async", "partitions 1", "greedy"):
            assert text in status


@pytest.mark.parametrize(("steps", "shown"), [((1999, 1990), "1999/2000 (99%)"),
                                              ((2000, 2001), "2001/2000 (100%)")])
def test_the_percentage_is_100_only_once_the_target_is_reached_on_both_screens(
        steps: tuple[int, int], shown: str) -> None:
    # 1,999 of 2,000 was "100%" in the app (rounded) while the run went on; async workers each
    # apply a last step, so a real run ends at 2,001 of 2,000: the true step, and 100%.
    settings = load_config(Path(__file__).resolve().parents[2] / "hosts.yaml").training.replace(steps=2000)
    tasks = tuple(TaskInfo(name=f"worker{i}", job=Job.WORKER, index=i, host="localhost", port=2000 + i)
                  for i in range(2))
    events: list[ControllerEvent] = [RunStarted(run_id="r1", run_dir=Path("/tmp/r1"), tasks=tasks,
                                                settings=settings, t=100.0)]
    tracker = ProgressTracker(2000)
    for index, step in enumerate(steps):
        event = protocol.Step(role="worker", index=index, global_step=step, local_step=step // 2,
                              loss=0.1, examples_per_sec=1000.0, step_time=0.01, target=2000)
        tracker.update(f"worker{index}", event, 101.0 + index)
        events += [TrainerEvent(task=f"worker{index}", event=event, t=101.0 + index),
                   ProgressUpdate(progress=tracker.snapshot(), t=101.0 + index)]
    out = io.StringIO()
    printer = Printer(out, colour=False)
    dashboard = Dashboard(settings, clock=lambda: 110.0)
    for event in events:
        printer.handle(event)
        dashboard.apply(event)
    printer.progress_line()
    step, rest = shown.split("/")
    target, percent = rest.split(" ")
    assert f"step {shown}" in out.getvalue(), out.getvalue()
    app = progress_text(dashboard.figures).plain
    assert f"global step {int(step):,} / {int(target):,}  {percent.strip('()')}" in app, app


def _two_workers_started(steps: int) -> tuple[TrainingSettings, list[ControllerEvent], ProgressTracker]:
    """The default hosts.yaml's settings to ``steps``, a run of two workers started at t=100,
    and the core's progress tracker for it."""
    settings = load_config(Path(__file__).resolve().parents[2] / "hosts.yaml").training.replace(steps=steps)
    tasks = tuple(TaskInfo(name=f"worker{i}", job=Job.WORKER, index=i, host="localhost", port=2000 + i)
                  for i in range(2))
    events: list[ControllerEvent] = [RunStarted(run_id="r1", run_dir=Path("/tmp/r1"), tasks=tasks,
                                                settings=settings, t=100.0)]
    return settings, events, ProgressTracker(steps)


def test_a_finished_run_shows_the_loss_it_ended_with_on_both_screens() -> None:
    # Seen on the lab: worker0 (the chief) done at step 3000 with loss 0.0186, worker1's last
    # step (3001, loss 0.0364) reported after it. Headless's summary (and the app's Runs pane)
    # said 0.0186; the app's Throughput pane stayed at 0.0364.
    settings, events, tracker = _two_workers_started(3000)
    stream: list[tuple[str, protocol.Event]] = [
        ("worker0", protocol.Step(role="worker", index=0, global_step=3000, local_step=1507, loss=0.0186,
                                  examples_per_sec=5837.0, step_time=0.01, target=3000)),
        ("worker0", protocol.Done(role="worker", index=0, reason="target_reached", global_step=3000,
                                  local_step=1507, loss=0.0186)),
        ("worker1", protocol.Step(role="worker", index=1, global_step=3001, local_step=1494, loss=0.0364,
                                  examples_per_sec=6515.0, step_time=0.01, target=3000)),
        ("worker1", protocol.Done(role="worker", index=1, reason="target_reached", global_step=3001,
                                  local_step=1494, loss=0.0364)),
    ]
    for n, (task, event) in enumerate(stream):
        changed = tracker.update(task, event, 101.0 + n)
        events.append(TrainerEvent(task=task, event=event, t=101.0 + n))
        if changed:
            events.append(ProgressUpdate(progress=tracker.snapshot(), t=101.0 + n))
    out = io.StringIO()
    printer = Printer(out, colour=False)
    dashboard = Dashboard(settings, clock=lambda: 110.0)
    for event in events:
        printer.handle(event)
        dashboard.apply(event)
    printer.progress_line()
    assert tracker.final_loss == pytest.approx(0.0186)  # what the summary says (final loss 0.0186)
    assert "loss 0.0186" in progress_text(dashboard.figures).plain, progress_text(dashboard.figures).plain
    assert out.getvalue().splitlines()[-1].endswith("loss 0.0186"), out.getvalue()


def test_a_worker_that_stopped_stepping_shows_no_rate_on_both_screens() -> None:
    # Seen on the lab: 20 s into a ps cut, the workers' last rate (162 ex/s) still shown.
    # worker1 stops stepping at 103; worker0 steps on. The core's snapshot once worker1's
    # rate is no longer known (the supervisor publishes one then, with no step to prompt it).
    settings, events, tracker = _two_workers_started(3000)
    n = 0
    for second in range(4):
        for index, rate in ((0, 100.0), (1, 62.0)):
            if index == 1 and second == 3:
                continue
            n += 1
            event = protocol.Step(role="worker", index=index, global_step=n, local_step=n, loss=0.5,
                                  examples_per_sec=rate, step_time=0.01, target=3000)
            tracker.update(f"worker{index}", event, 100.0 + second)
            events += [TrainerEvent(task=f"worker{index}", event=event, t=100.0 + second),
                       ProgressUpdate(progress=tracker.snapshot(100.0 + second), t=100.0 + second)]
    later = 102.0 + RATE_STALE_MIN + 0.5
    assert tracker.next_stale_at(103.0) == 102.0 + RATE_STALE_MIN
    events.append(ProgressUpdate(progress=tracker.snapshot(later), t=later))
    out = io.StringIO()
    printer = Printer(out, colour=False)
    dashboard = Dashboard(settings, clock=lambda: later)
    for event in events:
        printer.handle(event)
        dashboard.apply(event)
    printer.progress_line()
    line = out.getvalue().splitlines()[-1]
    assert "100.0 ex/s [worker0 100.0, worker1 -]" in line, line
    app = progress_text(dashboard.figures).plain
    assert number_before("ex/s", app) == 100.0, app
    assert dashboard.rows["worker1"].examples_per_sec is None
    assert dashboard.rows["worker0"].examples_per_sec == 100.0
