"""The slow-link judgement as logic: a ps whose traffic falls far below what its placed bytes
need at the run's earlier step rate gets a hint with both figures, taken back when it
carries enough again; a stall, a restart or a user's program earns none. On a real capped
link of the lab: tests/launch/test_lab_slow_link.py."""

from __future__ import annotations

import io
import re
from pathlib import Path

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.state import Dashboard
from tui.config.cluster import Job
from tui.core.events import (
    ControllerEvent,
    Notice,
    ProgressUpdate,
    RunStarted,
    TaskHint,
    TaskHintCleared,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.progress import ProgressSnapshot, WorkerProgress
from tui.core.slow_link import CLEAR_FACTOR, SLOW_FACTOR, WINDOW, SlowLinkWatch
from tui.core.task_state import TaskState
from tui.core.traffic import PsTraffic, TrafficSample, TrafficUpdate
from tui.headless import Printer
from tui.plan.tasks import TaskInfo

#: The placement's bytes on ps0: at 100 steps/s it needs 2 x 10,000 x 100 = 2 MB/s.
PLACED = 10_000
TASKS = (TaskInfo("ps0", Job.PS, 0, "h0", 2222), TaskInfo("worker0", Job.WORKER, 0, "h1", 2222),
         TaskInfo("worker1", Job.WORKER, 1, "h2", 2222))


class Run:
    """A watch fed a run second by second: ``rate`` steps/s, each moving the placed bytes
    both ways when ``bytes_per_step`` is None, else that many."""

    def __init__(self, tmp_path: Path, strategy: str = "greedy") -> None:
        self.published: list[ControllerEvent] = []
        self.watch = SlowLinkWatch(self.published.append)
        self.t = 0.0
        self.step = 0
        self.local = {"worker0": 0, "worker1": 0}
        self.total = 0
        self.watch.handle(RunStarted(run_id="r", run_dir=tmp_path, tasks=TASKS,
                                     settings=TrainingSettings(steps=10**6)))
        for info in TASKS:
            self.watch.handle(TaskStateChanged(task=info.name, old=TaskState.STARTING, new=TaskState.RUNNING))
        self.watch.handle(TrainerEvent(task="worker0", event=protocol.Placement(
            role="worker", index=0, model="m", strategy=strategy, partitions=1, num_ps=1, variables=(),
            ps_bytes=(PLACED,))))

    def go(self, seconds: float, rate: float, bytes_per_step: float | None = None,
           stepping: tuple[str, ...] = ("worker0", "worker1")) -> None:
        """Half-second samples for ``seconds``."""
        per_step = 2 * PLACED if bytes_per_step is None else bytes_per_step
        for _ in range(int(seconds * 2)):
            self.t += 0.5
            made = rate * 0.5
            self.step += int(made)
            self.total += int(made * per_step)
            for worker in stepping:
                self.local[worker] += max(1, int(made / len(stepping)))
            workers = tuple(WorkerProgress(task, 0, step, None, None) for task, step in self.local.items())
            snapshot = ProgressSnapshot(self.step, 10**6, 0.0, workers, None, None)
            self.watch.handle(ProgressUpdate(progress=snapshot))
            sample = TrafficSample(self.t, self.step, (PsTraffic("ps0", 0.0, 0.0, self.total // 2,
                                                                 self.total - self.total // 2),))
            self.watch.sample(TrafficUpdate(sample, ()))

    def hints(self) -> list[str]:
        return [e.hint for e in self.published if isinstance(e, TaskHint)]

    def cleared(self) -> list[str]:
        return [e.reason for e in self.published if isinstance(e, TaskHintCleared)]


def test_a_link_that_carries_far_below_the_need_is_named_with_both_figures_and_taken_back(
        tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)  # calm: the reference, 100 steps/s
    assert run.published == []
    run.go(3 * WINDOW, rate=5)  # capped: 5 steps/s, 0.1 MB/s
    (hint,) = run.hints()
    # The need is 2 x 10,000 B x the earlier 100 steps/s.
    carried = re.fullmatch(r"ps0's link carried ([\d.]+) KiB/s over the last 5 s; the placement at this "
                           r"run's earlier 100 steps/s needs ~1\.9 MiB/s: a slow or capped link\? check the "
                           r"link between ps0's host and the workers \(tc qdisc show, iperf3\)", hint)
    assert carried is not None, hint
    assert carried[1] == "97.7"  # the slow seconds' own figure: 5 steps/s x 20,000 B
    (notice,) = [e for e in run.published if isinstance(e, Notice)]
    assert (notice.task, notice.about, notice.text) == ("ps0", "link ps0", run.hints()[0])
    assert set(run.watch.slow) == {"ps0"}
    run.go(3 * WINDOW, rate=100)
    (cleared,) = run.cleared()
    again = re.fullmatch(r"its link carried ([\d.]+) MiB/s over the last 10 s "
                         r"\(the placement needs ~1\.9 MiB/s\)", cleared)
    assert again is not None, cleared
    assert float(again[1]) * 2**20 >= 2 * PLACED * 100 / CLEAR_FACTOR
    notices = [e.text for e in run.published if isinstance(e, Notice)]
    assert notices[-1] == f"ps0's link is no longer slow: {cleared}"
    assert run.watch.slow == {}
    assert len(run.hints()) == 1


def test_a_rate_that_swings_within_the_factor_earns_no_hint(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)
    run.go(3 * WINDOW, rate=100 / SLOW_FACTOR * 1.5)
    run.go(3 * WINDOW, rate=250)
    assert run.published == []


def test_a_worker_that_stops_stepping_is_not_a_slow_link(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)
    run.go(3 * WINDOW, rate=5, stepping=("worker0",))  # worker1 stopped: the stall watchdog's
    assert run.published == []


def test_a_ps_host_whose_counters_were_not_read_is_not_a_slow_link(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)
    run.go(3 * WINDOW, rate=100, bytes_per_step=0)  # its sampler did not answer: no bytes counted
    assert run.published == []


def test_a_restart_holds_judgement_until_a_whole_window_after_it(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)
    run.watch.handle(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.FAILED))
    run.go(3 * WINDOW, rate=5)
    assert run.published == []
    run.watch.handle(TaskStateChanged(task="worker1", old=TaskState.STARTING, new=TaskState.RUNNING))
    run.go(0.7 * WINDOW, rate=5)
    assert run.published == []
    run.go(WINDOW, rate=5)
    assert len(run.hints()) == 1


def test_a_link_slow_from_the_start_and_a_users_program_earn_no_hint(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(60, rate=5)  # the run's own rate is the reference: nothing to compare with
    assert run.published == []
    own = Run(tmp_path, strategy="user program")  # bytes per step not known
    own.go(40, rate=100)
    own.go(3 * WINDOW, rate=5)
    assert own.published == []


def test_both_screens_show_the_hint_and_the_app_takes_it_down(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.go(40, rate=100)
    run.go(3 * WINDOW, rate=5)
    run.go(3 * WINDOW, rate=100)
    (hint,) = run.hints()
    started = RunStarted(run_id="r", run_dir=tmp_path, tasks=TASKS, settings=TrainingSettings(steps=10**6))
    app = Dashboard(TrainingSettings())
    app.apply(started)
    headless = io.StringIO()
    printer = Printer(headless, colour=False)
    printer.handle(started)
    for event in run.published:
        printer.handle(event)
        app.apply(event)
        if isinstance(event, TaskHint):
            assert app.hints == [("ps0", hint)]
    assert app.hints == []
    assert f"ps0     | hint: {hint}" in headless.getvalue()
    assert f"ps0     | warning: {hint}" in headless.getvalue()
    assert "ps0     | info: ps0's link is no longer slow: its link carried" in headless.getvalue()
