"""Time to first step on every worker, 1 ps + 2 workers: the controller (``tfdist-tui
--no-ui``) versus a bare launch of the same ``python -m trainer`` tasks (the floor) versus
the seed-style program. Each is timed from its process launch (the controller's own, or
the first task's) to each worker's first training step, as the step events stamp it.

Target: controller / bare <= 1.10.

    python -m bench.controller.startup [--reps 3] [--window 1]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

from bench.harness.report import Figure, Section, Target, plural, table
from bench.harness.stats import median_of
from bench.training import run_records
from bench.training.campaign import Campaign, paired, per_rep, run_alone
from bench.training.run_records import RunConfig, RunRecord, Side

#: At its default size, on 2 cores.
RUN_TIME = "about 3 min"

TARGET = Target("<=", 1.10)
#: A non-chief first step this long after the chief's means SessionManager's 30 s wait.
RECOVERY_WAIT_SEEN = 20.0
COMMAND = "python -m bench.controller.startup"


def sides(model: str, mode: str) -> tuple[Side, ...]:
    """The sides this benchmark needs: bare, the controller, the seed-style program."""
    return (Side.BARE, Side.HEADLESS, Side.SEED)


def every_worker(record: RunRecord) -> float | None:
    """Seconds from launch until the last worker's first step (None if one never stepped)."""
    firsts = run_records.first_steps(record)
    if len(firsts) < record.config.workers:
        return None
    return max(firsts.values())


def worker(name: str) -> Callable[[RunRecord], float | None]:
    """The metric: seconds from launch to worker ``name``'s first step."""
    def first(record: RunRecord) -> float | None:
        return run_records.first_steps(record).get(name)

    return first


def own_start(record: RunRecord) -> float | None:
    """A controller's own start: from its launch until it started its first task."""
    if record.first_task_started_at is None:
        return None
    return record.first_task_started_at - record.launched_at


def primary(campaign: Campaign) -> RunConfig | None:
    """The product's default configuration (mlp, async) if it ran, else the first one."""
    configs = [c for c in campaign.configs if campaign.has(c, Side.BARE)]
    default = [c for c in configs if (c.model, c.mode) == ("mlp", "async")]
    chosen = default or configs
    return chosen[0] if chosen else None


def _held_back(campaign: Campaign, config: RunConfig) -> str:
    """Where the controller's extra seconds go, from the runs themselves."""
    controller = per_rep(campaign, config, Side.HEADLESS, every_worker)
    bare = per_rep(campaign, config, Side.BARE, every_worker)
    extra = [c - b for c, b in zip(controller, bare, strict=True) if c == c and b == b]
    own = median_of(per_rep(campaign, config, Side.HEADLESS, own_start))
    handoffs = median_of(per_rep(campaign, config, Side.HEADLESS, run_records.staged_handoffs))
    spread = [b for b in bare if b == b]
    if not extra or own is None or handoffs is None or not spread:
        return "see the table"
    rest = statistics.median(extra) - own - handoffs
    return (f"the controller adds {statistics.median(extra):.1f} s: {own:.1f} s pass before it "
            f"starts its first task (its own Python start-up: imports, config, preflight), its "
            f"staged start (every task loaded to every task ready) takes {handoffs:.2f} s, and "
            f"the remaining {rest:.1f} s is within how much the tasks' own start-up varies "
            f"between repetitions on this shared machine (bare: {min(spread):.1f}–"
            f"{max(spread):.1f} s)")



def section(campaign: Campaign, command: str = COMMAND) -> Section:
    """The start-up part of BENCHMARKS.md, from the campaign's runs."""
    main_config = primary(campaign)
    intro = (
        "From the launch of each side until each worker's first training step (the `t` of "
        "its first `step` event): the controller from the start of `python -m tui HOSTS.yaml "
        "--no-ui`, the bare trainer and the seed-style program from the start of their first "
        "task (all tasks at once, each in its own session, stdin a pipe, as the controller "
        "launches them). The bare tasks run exactly the controller's command lines and "
        "environment (`tui.plan.tasks.plan_run`) without `--hold`. Seconds, then ratios of runs of "
        "the same repetition.")
    result = Section("1. Time to first step", command, intro)
    if main_config is None:
        result.notes.append("No run measured start-up.")
        return result
    shown = [s for s in (Side.BARE, Side.HEADLESS, Side.APP, Side.SEED) if campaign.has(main_config, s)]
    attempted = campaign.plan.reps
    rows = []
    names = [f"worker{i}" for i in range(main_config.workers)]
    measures = [(f"{name}'s first step{' (chief)' if name == 'worker0' else ''}", worker(name))
                for name in names] + [("every worker stepping", every_worker)]
    for label, metric in measures:
        cells = [Figure(label, per_rep(campaign, main_config, s, metric), unit=" s", digits=1,
                        attempted=attempted).cell() for s in shown]
        rows.append([label, *cells])
    if any(s.is_controller for s in shown):
        rows.append(["the controller started its first task", *[
            Figure("", per_rep(campaign, main_config, s, own_start), unit=" s", digits=1,
                   attempted=attempted).cell() if s.is_controller else "" for s in shown]])
        rows.append(["its staged start: every task loaded → every task ready", *[
            Figure("", per_rep(campaign, main_config, s, run_records.staged_handoffs), unit=" s",
                   attempted=attempted).cell() if s.is_controller else "" for s in shown]])
    result.tables.append(f"{main_config.label}, 1 ps + {plural(main_config.workers, 'worker')}, seconds "
                         "from launch, median (min–max):\n\n"
                         + table(["from launch to…", *[s.label for s in shown]], rows))

    ratio_rows = []
    for config in campaign.configs:
        if not campaign.has(config, Side.BARE):
            continue
        cells = []
        for side in (Side.HEADLESS, Side.APP, Side.SEED):
            if not campaign.has(config, side):
                cells.append("")
                continue
            figure = Figure(f"{config.label}: {side.label} / bare, every worker stepping",
                            paired(campaign, config, side, Side.BARE, every_worker),
                            attempted=attempted,
                            target=TARGET if side is Side.HEADLESS else None,
                            held_back=_held_back(campaign, config) if side is Side.HEADLESS else "")
            cells.append(figure.cell())
            if side is Side.HEADLESS:
                result.figures.append(figure)
        ratio_rows.append([config.label, *cells])
    result.tables.append("Every worker stepping, ratio to the bare trainer of the same repetition:\n\n"
                         + table(["configuration", "controller --no-ui / bare", "Textual app / bare",
                                  "seed-style / bare"], ratio_rows))
    waits = [f"{config.label}: {count} of {total}" for config in campaign.configs
             for count, total in [_recovery_waits(campaign, config)] if total]
    if waits:
        result.notes.append(
            "The seed-style program's non-chief workers wait `SessionManager`'s "
            "`recovery_wait_secs` (30 s) whenever they find the model not yet initialised by the "
            "chief, which depends on which of them gets there first "
            "(tensorflow/tensorflow#10679); the medians above can hide it. Seed-style runs in "
            f"which a non-chief worker took its first step {RECOVERY_WAIT_SEEN:g} s or more after "
            f"the chief: {'; '.join(waits)}. Our trainer's non-chief workers poll every 50 ms.")
    return result


def _recovery_waits(campaign: Campaign, config: RunConfig) -> tuple[int, int]:
    """(seed runs whose non-chief waited for SessionManager's recovery, seed runs)."""
    if not campaign.has(config, Side.SEED) or config.workers < 2:
        return 0, 0
    runs_done = [r for r in campaign.of(config, Side.SEED) if r is not None]
    waited = 0
    for record in runs_done:
        firsts = run_records.first_steps(record)
        if "worker0" in firsts and max(firsts.values()) - firsts["worker0"] >= RECOVERY_WAIT_SEEN:
            waited += 1
    return waited, len(runs_done)


def main(argv: list[str] | None = None) -> int:
    """Run this benchmark alone and print its section."""
    return run_alone(argv, command=COMMAND, doc=__doc__, section=section, sides=sides,
                     reps=3, seconds=1.0, models=("mlp",), modes=("async",), seed_trains=False)


if __name__ == "__main__":
    sys.exit(main())
