"""Repetitions of cluster runs, interleaved: in every repetition each configuration is run
once on each side (bare, headless, app, seed...), one after the other, so that whatever
else the shared machine is doing hits every side alike. Each benchmark of this package
reads its figures from the runs of one campaign; ``python -m bench`` runs one campaign for
all of them.

Sizes are times, not steps: every run is to train for a window (:mod:`bench.harness.window`) of
``--window`` seconds (default 10) once every worker is warm. The bare trainer and the
controller end a run by themselves at its step target, so before the repetitions a short
calibration run of each configuration (the bare trainer, stopped after a window of at most
:data:`CALIBRATION_SECONDS`) measures this machine's step rate, from which the step target
is chosen (:func:`bench.harness.window.steps_for_window`); the window each run actually had is
printed as it ends and reported with the figures. A seed-style run has no natural end: it
is stopped once its window is as long as the bare trainer's of the same repetition (or at
its first steps when only start-up is measured).
"""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from bench.harness import window as windows
from bench.harness.processes import REPO
from bench.harness.report import Section, plural, ratios, values
from bench.training import run_records, runs
from bench.training.run_records import RunConfig, RunRecord, Side
from bench.training.runs import Budget

#: Global steps per second of 1 ps + 2 workers on the reference machine (2 cores, shared:
#: the bare trainer's medians in BENCHMARKS.md); only used to size runs whose calibration
#: failed.
NOMINAL_STEPS_PER_SEC: dict[tuple[str, str], float] = {
    ("mlp", "async"): 195.0, ("cnn", "async"): 62.0, ("mlp", "sync"): 85.0, ("cnn", "sync"): 27.0,
}
#: Time allowed for the warm-up steps before the measured window.
WARMUP_SECONDS = 1.0
#: The longest window of a calibration run (shorter when the asked window is).
CALIBRATION_SECONDS = 3.0
#: A step target no calibration run reaches: it is stopped after its window.
UNBOUNDED_STEPS = 10**9


def minimum_steps(workers: int, log_every: int) -> int:
    """Enough global steps for every worker to get warm and report a few more steps."""
    return workers * (windows.WARMUP_LOCAL_STEPS + 2 * log_every)


def steps_for(model: str, mode: str, seconds: float, workers: int, log_every: int) -> int:
    """Global steps that keep a run training for about ``seconds`` after warm-up at the
    reference machine's nominal rate (the size of a run whose calibration failed)."""
    rate = NOMINAL_STEPS_PER_SEC.get((model, mode), 20.0)
    return max(minimum_steps(workers, log_every), math.ceil(rate * (seconds + WARMUP_SECONDS)))


@dataclass(frozen=True)
class Plan:
    """Which configurations run on which sides, how often and how long."""

    configs: tuple[tuple[RunConfig, tuple[Side, ...]], ...]
    reps: int = 3
    #: Seconds every run is to train once warm (its window).
    window: float = windows.DEFAULT_SECONDS
    #: Seed runs train as long as the same repetition's bare run (True), or stop at their
    #: first steps (False: start-up only).
    seed_trains: bool = True
    timeout: float = 300.0

    @classmethod
    def build(cls, models: Sequence[str], modes: Sequence[str], sides: Callable[[str, str], Sequence[Side]],
              *, reps: int, seconds: float, workers: int = 2, log_every: int = 10,
              seed_trains: bool = True) -> Plan:
        """One configuration per model x mode, each on ``sides(model, mode)``."""
        configs = []
        for model in models:
            for mode in modes:
                chosen = tuple(sides(model, mode))
                if chosen:
                    steps = steps_for(model, mode, seconds, workers, log_every)
                    configs.append((RunConfig(model=model, mode=mode, steps=steps, workers=workers,
                                              log_every=log_every), chosen))
        return cls(tuple(configs), reps=reps, window=seconds, seed_trains=seed_trains)

    def resized(self, steps: dict[RunConfig, int]) -> Plan:
        """The same plan with the step targets given (the others kept)."""
        configs = tuple((replace(config, steps=steps.get(config, config.steps)), sides)
                        for config, sides in self.configs)
        return replace(self, configs=configs)

    @property
    def runs(self) -> int:
        """How many cluster runs the plan makes."""
        return self.reps * sum(len(sides) for _, sides in self.configs)


@dataclass
class Campaign:
    """The runs of a plan, in the order they ran."""

    plan: Plan
    records: list[RunRecord] = field(default_factory=list)
    #: The calibration runs that sized the plan's runs (:func:`calibrate`).
    calibration: list[RunRecord] = field(default_factory=list)
    seconds: float = 0.0

    def of(self, config: RunConfig, side: Side) -> list[RunRecord | None]:
        """One entry per repetition (None: that run failed)."""
        found: list[RunRecord | None] = []
        for rep in range(self.plan.reps):
            match = [r for r in self.records if r.config == config and r.side is side and r.rep == rep]
            found.append(match[0] if match and match[0].ok else None)
        return found

    def has(self, config: RunConfig, side: Side) -> bool:
        """Whether the plan runs ``config`` on ``side``."""
        return any(c == config and side in sides for c, sides in self.plan.configs)

    @property
    def configs(self) -> list[RunConfig]:
        """The planned configurations, in order."""
        return [c for c, _ in self.plan.configs]

    @property
    def workers_label(self) -> str:
        """``2 workers`` (every configuration has the same number, unless sized otherwise)."""
        counts = sorted({c.workers for c in self.configs}) or [0]
        return plural(counts[0], "worker") if len(counts) == 1 else f"{counts} workers"

    def failures(self) -> list[str]:
        """One line per failed run (calibration runs included): which, and why."""
        calibration = [f"{r.config.label}, calibration: {r.failure}" for r in self.calibration if not r.ok]
        return calibration + [f"{r.config.label}, {r.side.label}, repetition {r.rep + 1}: {r.failure}"
                              for r in self.records if not r.ok]


def _seed_window(campaign: Campaign, config: RunConfig, rep: int) -> float | None:
    if not campaign.plan.seed_trains:
        return None
    for record in campaign.records:
        if record.config == config and record.side is Side.BARE and record.rep == rep and record.ok:
            measured = run_records.window(record)
            if measured is not None:
                return measured.seconds
    return campaign.plan.window


def calibrate(plan: Plan, root: Path, say: Callable[[str], None]) -> tuple[Plan, list[RunRecord]]:
    """The plan with each configuration's step target chosen from a short bare run of it on
    this machine, so that every run trains for about ``plan.window`` seconds once warm (the
    nominal size where a calibration run fails); and the calibration runs."""
    seconds = min(plan.window, CALIBRATION_SECONDS)
    steps = {}
    records = []
    for number, (config, _) in enumerate(plan.configs, 1):
        probe = replace(config, steps=UNBOUNDED_STEPS)
        begun = time.monotonic()
        record = runs.run(Side.BARE, probe, 0, root / f"calibration-{number}",
                          Budget(timeout=plan.timeout, stop_after=seconds))
        records.append(record)
        measured = run_records.window(record) if record.ok else None
        if measured is None:
            say(f"calibration of {config.label} failed ({record.failure or 'no window'}): "
                f"{config.steps} steps, from the nominal rate")
            continue
        steps[config] = windows.steps_for_window(
            measured, plan.window, minimum_steps(config.workers, config.log_every))
        say(f"calibration of {config.label}: {measured.steps_per_sec:,.1f} global steps/s over "
            f"{measured.seconds:.1f} s: {steps[config]} steps for a {plan.window:g} s window "
            f"({time.monotonic() - begun:.0f} s)")
    return plan.resized(steps), records


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every run's clean-up (its finally blocks) happens."""
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def warm_caches() -> None:
    """Import what the app imports (Textual) once, in a throwaway process, so that the first
    measured run does not pay for a cold page cache that the runs after it are spared (the
    calibration runs do the same for TensorFlow and the data)."""
    code = "import textual.app, tui.app"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120, check=False)


def run_campaign(plan: Plan, *, progress: Callable[[str], None] | None = None,
                 workdir: Path | None = None) -> Campaign:
    """Calibrate the plan's run sizes, then run every repetition of it, interleaved; each
    run's files go to a temporary directory (removed at the end unless ``workdir`` is
    given)."""
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    campaign = Campaign(plan)
    started = time.monotonic()
    temporary = None if workdir is not None else tempfile.mkdtemp(prefix="tfdist-bench-")
    root = workdir or Path(temporary or ".")
    number = 0
    try:
        with _sigterm_interrupts():
            # The app's imports warm up while the calibration runs start TensorFlow: both
            # finish before the first measured run.
            warming = threading.Thread(target=warm_caches, daemon=True)
            warming.start()
            try:
                plan, campaign.calibration = calibrate(plan, root, say)
            finally:
                warming.join()
            campaign.plan = plan
            for rep in range(plan.reps):
                for config, sides in plan.configs:
                    for side in sides:
                        number += 1
                        budget = Budget(timeout=plan.timeout,
                                        stop_after=_seed_window(campaign, config, rep)
                                        if side is Side.SEED else None)
                        begun = time.monotonic()
                        record = runs.run(side, config, rep, root / f"{number:03d}-{side.value}", budget)
                        campaign.records.append(record)
                        measured = run_records.window(record)
                        outcome = "ok" if record.ok else f"FAILED: {record.failure}"
                        if measured is not None:
                            outcome += f", window {measured.seconds:.1f} s"
                        say(f"[{number}/{plan.runs}] rep {rep + 1}, {config.label} ({config.steps} steps), "
                            f"{side.label}: {time.monotonic() - begun:.0f} s, {outcome}")
    finally:
        campaign.seconds = time.monotonic() - started
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    return campaign


def paired(campaign: Campaign, config: RunConfig, side: Side, baseline: Side,
           metric: Callable[[RunRecord], float | None]) -> tuple[float, ...]:
    """``metric(side) / metric(baseline)`` for each repetition (NaN where a run failed)."""
    def measure(record: RunRecord | None) -> float | None:
        return None if record is None else metric(record)

    return ratios((measure(a), measure(b))
                  for a, b in zip(campaign.of(config, side), campaign.of(config, baseline), strict=True))


def per_rep(campaign: Campaign, config: RunConfig, side: Side,
            metric: Callable[[RunRecord], float | None]) -> tuple[float, ...]:
    """``metric`` of each repetition's run (NaN where it failed)."""
    return values(None if r is None else metric(r) for r in campaign.of(config, side))


@dataclass(frozen=True)
class Size:
    """A standalone benchmark's size on the command line."""

    reps: int
    #: The measurement window, seconds.
    window: float
    workers: int
    models: tuple[str, ...]
    modes: tuple[str, ...]


def size_arguments(parser: argparse.ArgumentParser, *, reps: int, seconds: float,
                   models: Sequence[str], modes: Sequence[str]) -> None:
    """The size flags every cluster benchmark takes."""
    parser.add_argument("--reps", type=int, default=reps, help=f"repetitions (default {reps})")
    parser.add_argument("--window", "--seconds", dest="window", type=float, default=seconds,
                        metavar="SECONDS", help="seconds every run trains once warm, its "
                        f"measurement window; run sizes are calibrated for it (default {seconds:g})")
    parser.add_argument("--workers", type=int, default=2, help="workers besides the one ps (default 2)")
    parser.add_argument("--models", default=",".join(models), help="comma-separated (default %(default)s)")
    parser.add_argument("--modes", default=",".join(modes), help="comma-separated (default %(default)s)")


def size_from(args: argparse.Namespace) -> Size:
    """The size the flags of :func:`size_arguments` ask for."""
    def split(text: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in text.split(",") if part.strip())

    if args.reps < 1 or args.workers < 1 or args.window <= 0:
        raise SystemExit("--reps and --workers must be >= 1, --window > 0")
    return Size(args.reps, args.window, args.workers, split(args.models), split(args.modes))


def run_alone(argv: list[str] | None, *, command: str, doc: str | None,
              section: Callable[[Campaign], Section], sides: Callable[[str, str], Sequence[Side]],
              reps: int, seconds: float, models: Sequence[str], modes: Sequence[str],
              seed_trains: bool = True) -> int:
    """The ``main`` of one cluster benchmark run on its own: parse its size flags, run its
    campaign, print its section; exit status 1 if any run failed."""
    parser = argparse.ArgumentParser(prog=command, description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size_arguments(parser, reps=reps, seconds=seconds, models=models, modes=modes)
    size = size_from(parser.parse_args(argv))
    plan = Plan.build(size.models, size.modes, sides, reps=size.reps, seconds=size.window,
                      workers=size.workers, seed_trains=seed_trains)
    campaign = run_campaign(plan)
    print(section(campaign).markdown())
    for failure in campaign.failures():
        print(f"failed: {failure}", file=sys.stderr)
    return 0 if not campaign.failures() else 1
