"""Repetitions of cluster runs, interleaved: in every repetition each configuration is run
once on each side (bare, headless, app, seed...), one after the other, so that whatever
else the shared machine is doing hits every side alike. Each benchmark of this package
reads its figures from the runs of one campaign; ``python -m bench`` runs one campaign for
all of them.

Sizes: a run trains for ``steps`` global steps, chosen from ``seconds`` and the nominal
rate of each configuration on the reference machine (:data:`NOMINAL_STEPS_PER_SEC`); the
window actually measured is reported with the figures. A seed-style run has no natural
end: it is stopped once it has trained, warm, as long as the bare trainer of the same
repetition did (or at its first steps when only start-up is measured).
"""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from bench import runs
from bench.report import Section, plural, ratios, values
from bench.runs import Budget, RunConfig, RunRecord, Side

#: Global steps per second of 1 ps + 2 workers on the reference machine (2 cores, shared:
#: the bare trainer's medians in BENCHMARKS.md); only used to size runs.
NOMINAL_STEPS_PER_SEC: dict[tuple[str, str], float] = {
    ("mlp", "async"): 195.0, ("cnn", "async"): 62.0, ("mlp", "sync"): 85.0, ("cnn", "sync"): 27.0,
}
#: Time allowed for the warm-up steps before the measured window.
WARMUP_SECONDS = 1.0


def steps_for(model: str, mode: str, seconds: float, workers: int, log_every: int) -> int:
    """Global steps that keep a run training for about ``seconds`` after warm-up; at least
    enough for every worker to get warm and report a few more steps."""
    rate = NOMINAL_STEPS_PER_SEC.get((model, mode), 20.0)
    minimum = workers * (runs.WARMUP_LOCAL_STEPS + 2 * log_every)
    return max(minimum, math.ceil(rate * (seconds + WARMUP_SECONDS)))


@dataclass(frozen=True)
class Plan:
    """Which configurations run on which sides, how often and how long."""

    configs: tuple[tuple[RunConfig, tuple[Side, ...]], ...]
    reps: int = 3
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
        return cls(tuple(configs), reps=reps, seed_trains=seed_trains)

    @property
    def runs(self) -> int:
        """How many cluster runs the plan makes."""
        return self.reps * sum(len(sides) for _, sides in self.configs)


@dataclass
class Campaign:
    """The runs of a plan, in the order they ran."""

    plan: Plan
    records: list[RunRecord] = field(default_factory=list)
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
        """One line per failed run: which, and why."""
        return [f"{r.config.label}, {r.side.label}, repetition {r.rep + 1}: {r.failure}"
                for r in self.records if not r.ok]


def _seed_window(campaign: Campaign, config: RunConfig, rep: int) -> float | None:
    if not campaign.plan.seed_trains:
        return None
    for record in campaign.records:
        if record.config == config and record.side is Side.BARE and record.rep == rep and record.ok:
            measured = runs.window(record)
            if measured is not None:
                return measured.seconds
    return max(2.0, (config.steps / NOMINAL_STEPS_PER_SEC.get((config.model, config.mode), 20.0))
               - WARMUP_SECONDS)


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
    """Import what every side imports (TensorFlow, scikit-learn's digits, Textual) once, in
    a throwaway process, so that the first measured run does not pay for a cold page cache
    that the runs after it are spared."""
    code = ("from trainer.tfimport import import_tf; import_tf(); from trainer import data, settings; "
            "data.load(settings.TrainingSettings()); import textual.app, tui.app")
    subprocess.run([sys.executable, "-c", code], cwd=runs.REPO, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120, check=False)


def run_campaign(plan: Plan, *, progress: Callable[[str], None] | None = None,
                 workdir: Path | None = None) -> Campaign:
    """Run every repetition of the plan, interleaved; each run's files go to a temporary
    directory (removed at the end unless ``workdir`` is given)."""
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    campaign = Campaign(plan)
    started = time.monotonic()
    temporary = None if workdir is not None else tempfile.mkdtemp(prefix="tfdist-bench-")
    root = workdir or Path(temporary or ".")
    number = 0
    try:
        with _sigterm_interrupts():
            warm_caches()
            for rep in range(plan.reps):
                for config, sides in plan.configs:
                    for side in sides:
                        number += 1
                        budget = Budget(timeout=plan.timeout,
                                        seed_window=_seed_window(campaign, config, rep)
                                        if side is Side.SEED else None)
                        begun = time.monotonic()
                        record = runs.run(side, config, rep, root / f"{number:03d}-{side.value}", budget)
                        campaign.records.append(record)
                        outcome = "ok" if record.ok else f"FAILED: {record.failure}"
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
    seconds: float
    workers: int
    models: tuple[str, ...]
    modes: tuple[str, ...]


def size_arguments(parser: argparse.ArgumentParser, *, reps: int, seconds: float,
                   models: Sequence[str], modes: Sequence[str]) -> None:
    """The size flags every cluster benchmark takes."""
    parser.add_argument("--reps", type=int, default=reps, help=f"repetitions (default {reps})")
    parser.add_argument("--seconds", type=float, default=seconds,
                        help=f"training seconds per run after warm-up, roughly (default {seconds:g})")
    parser.add_argument("--workers", type=int, default=2, help="workers besides the one ps (default 2)")
    parser.add_argument("--models", default=",".join(models), help="comma-separated (default %(default)s)")
    parser.add_argument("--modes", default=",".join(modes), help="comma-separated (default %(default)s)")


def size_from(args: argparse.Namespace) -> Size:
    """The size the flags of :func:`size_arguments` ask for."""
    def split(text: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in text.split(",") if part.strip())

    if args.reps < 1 or args.workers < 1 or args.seconds <= 0:
        raise SystemExit("--reps and --workers must be >= 1, --seconds > 0")
    return Size(args.reps, args.seconds, args.workers, split(args.models), split(args.modes))


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
    plan = Plan.build(size.models, size.modes, sides, reps=size.reps, seconds=size.seconds,
                      workers=size.workers, seed_trains=seed_trains)
    campaign = run_campaign(plan)
    print(section(campaign).markdown())
    for failure in campaign.failures():
        print(f"failed: {failure}", file=sys.stderr)
    return 0 if not campaign.failures() else 1
