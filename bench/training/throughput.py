"""Throughput under supervision: examples/sec of the same training run under the headless
controller and under the Textual app (headless, through Textual's test driver) versus the
bare trainer, for mlp and cnn, async and sync; and what supervising costs the controller,
in CPU seconds per 1,000 events.

Throughput is measured the same way for every side, from the workers' step events (the
controller's run directory records them; the bare run's stdout is read here): global steps
x examples per global step / seconds, over the window of :mod:`bench.harness.window`: from the
moment every worker is past its warm-up steps until the first worker takes its last step,
``--window`` seconds (default 10) by the campaign's calibrated run sizes; each ratio is
reported beside the windows it was measured over. Target: >= 0.97.

    python -m bench.training.throughput [--reps 3] [--window 10] [--models mlp,cnn] [--modes async,sync]
"""

from __future__ import annotations

import os
import statistics
import sys

from bench.harness import window as windows
from bench.harness.report import Figure, Section, Target, table, within_noise
from bench.harness.stats import median_of
from bench.training import run_records
from bench.training.campaign import Campaign, paired, per_rep, run_alone
from bench.training.run_records import RunConfig, RunRecord, Side

#: At its default size, on 2 cores.
RUN_TIME = "about 15 min"

TARGET = Target(">=", 0.97)
COMMAND = "python -m bench.training.throughput"
FRONTS = (Side.HEADLESS, Side.APP)
#: What a profile of the app showed when this benchmark was written (cProfile of
#: ``python -m bench.training.app_driver`` on an mlp async run); kept as a note, not measured each run.
APP_NOTE = (
    "The app's CPU hardly depends on the event rate (compare mlp at about 20 events/s with "
    "cnn at about 6): it is the cost of its refresh tick, ten times a second. A profile of "
    "`python -m bench.training.app_driver` (cProfile, mlp async) put most of it in Textual's screen "
    "layout and compositing: every tick, `StatusBar.show` and `ThroughputView.show` "
    "(`tui/app/widgets.py`, the latter also while its tab is hidden) call `Static.update` "
    "with its default `layout=True`, which makes Textual re-lay-out the whole screen "
    "(`Screen._refresh_layout`, about once per tick) whether or not the text changed, and "
    "`TaskTable.show` rewrites every cell once a second. Skipping unchanged updates and "
    "passing `layout=False` where a widget's size cannot change is where the app's missing "
    "throughput would come from.")


def sides(model: str, mode: str) -> tuple[Side, ...]:
    """The sides this benchmark needs: bare, the controller, the app."""
    return (Side.BARE, *FRONTS)


def examples_per_sec(record: RunRecord) -> float | None:
    """Examples/sec over the run's window (None without one)."""
    measured = run_records.window(record)
    return None if measured is None else measured.examples_per_sec(record.config.examples_per_global_step)


def window_seconds(record: RunRecord) -> float | None:
    """How long the run's window lasted (None without one)."""
    measured = run_records.window(record)
    return None if measured is None else measured.seconds


def window_cell(campaign: Campaign, config: RunConfig, side: Side) -> str:
    """The windows ``side``'s runs of ``config`` had: median (range), seconds."""
    return Figure("", per_rep(campaign, config, side, window_seconds), unit=" s", digits=1,
                  attempted=campaign.plan.reps).cell()


def _window_usage(record: RunRecord) -> tuple[float, int, float] | None:
    """(controller CPU seconds, events received, window seconds) over the run's window."""
    measured = run_records.window(record)
    if measured is None:
        return None
    cpu = run_records.controller_cpu(record, measured.start, measured.end)
    events = sum(1 for t in record.event_times if measured.start <= t <= measured.end)
    if cpu is None or events == 0:
        return None
    return cpu, events, measured.seconds


def cpu_per_1000_events(record: RunRecord) -> float | None:
    """The controller's CPU seconds per 1,000 trainer events, over the window."""
    usage = _window_usage(record)
    return None if usage is None else usage[0] / usage[1] * 1000


def core_share(record: RunRecord) -> float | None:
    """The controller's CPU time as a fraction of one core, over the window."""
    usage = _window_usage(record)
    return None if usage is None else usage[0] / usage[2]


def events_per_sec(record: RunRecord) -> float | None:
    """Trainer events the controller received per second, over the window."""
    usage = _window_usage(record)
    return None if usage is None else usage[1] / usage[2]



def _held_back(campaign: Campaign, config: RunConfig, side: Side) -> str:
    """What the numbers say holds a front end's throughput back: its own CPU, or noise."""
    share = median_of(per_rep(campaign, config, side, core_share))
    cost = median_of(per_rep(campaign, config, side, cpu_per_1000_events))
    ratio_samples = [r for r in paired(campaign, config, side, Side.BARE, examples_per_sec) if r == r]
    if share is None or cost is None or not ratio_samples:
        return "see the table"
    cores = os.cpu_count() or 1
    taken = share / cores  # of the machine the tasks keep busy
    gap = 1 - statistics.median(ratio_samples)
    text = (f"the {side.label}'s own process used {share:.0%} of a core over the window "
            f"({cost:.2f} CPU s per 1,000 events), about {taken:.0%} of the {cores} cores the "
            f"{config.workers + 1} tasks keep busy")
    if gap > 2 * taken + 0.01:
        noise = within_noise(ratio_samples, TARGET)
        return text + f"; that explains little of the {gap:.0%} gap" + (
            f" ({noise})" if noise else
            f", which every repetition showed ({min(ratio_samples):.2f}–{max(ratio_samples):.2f}); "
            "its cause is not the controller's CPU and this benchmark does not identify it")
    return text + f", which accounts for most of the {gap:.0%} gap" + (
        " (where that CPU goes: see the note below the table)" if side is Side.APP else "")


def _log_every(campaign: Campaign) -> str:
    return "/".join(str(n) for n in sorted({c.log_every for c in campaign.configs}))


def section(campaign: Campaign, command: str = COMMAND) -> Section:
    """The throughput part of BENCHMARKS.md, from the campaign's runs."""
    intro = (
        "Examples/sec of one run, from the workers' `step` events: global steps x examples "
        "per global step (batch 64; x workers in sync mode) per second, from the moment every "
        f"worker is past local step {windows.WARMUP_LOCAL_STEPS} until the first worker's last "
        f"step: a window of {campaign.plan.window:g} s or more (each run's step target is "
        "chosen from a short calibration run on this machine; the windows the runs had are "
        f"beside the ratios). 1 ps + {campaign.workers_label}, digits, step events every "
        f"{_log_every(campaign)} local steps (and at least once a second). The controller's "
        "CPU is its own process's user+system time (psutil, sampled every 0.1 s) over the "
        "same window, per trainer event it received in that window.")
    result = Section("2. Throughput under supervision", command, intro)
    attempted = campaign.plan.reps
    rows, cpu_rows = [], []
    for config in campaign.configs:
        if not campaign.has(config, Side.BARE):
            continue
        bare = Figure("", per_rep(campaign, config, Side.BARE, examples_per_sec), digits=0,
                      attempted=attempted)
        cells = [bare.cell(), window_cell(campaign, config, Side.BARE)]
        cpu_cells = []
        for side in FRONTS:
            if not campaign.has(config, side):
                cells += ["", ""]
                cpu_cells += ["", ""]
                continue
            figure = Figure(f"{config.label}: {side.label} / bare trainer, examples/sec",
                            paired(campaign, config, side, Side.BARE, examples_per_sec),
                            attempted=attempted, target=TARGET,
                            held_back=_held_back(campaign, config, side))
            result.figures.append(figure)
            cells += [figure.cell(), window_cell(campaign, config, side)]
            cpu_cells.append(Figure("", per_rep(campaign, config, side, cpu_per_1000_events),
                                    attempted=attempted).cell())
            share = per_rep(campaign, config, side, core_share)
            cpu_cells.append(Figure("", tuple(100 * s for s in share), unit=" %", digits=0,
                                    attempted=attempted).cell())
        rows.append([config.label, *cells])
        rate = Figure("", per_rep(campaign, config, Side.HEADLESS, events_per_sec), digits=0,
                      attempted=attempted)
        cpu_rows.append([config.label, rate.cell(), *cpu_cells])
    result.tables.append(table(["configuration", "bare trainer, examples/s", "window (bare)",
                                "controller --no-ui / bare", "window (--no-ui)",
                                "Textual app / bare", "window (app)"], rows))
    result.tables.append("What supervising costs the controller process, over the same window:\n\n"
                         + table(["configuration", "events/s", "--no-ui: CPU s per 1,000 events",
                                  "--no-ui: % of a core", "app: CPU s per 1,000 events",
                                  "app: % of a core"], cpu_rows))
    if any(campaign.has(c, Side.APP) for c in campaign.configs):
        result.notes.append(APP_NOTE)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run this benchmark alone and print its section."""
    return run_alone(argv, command=COMMAND, doc=__doc__, section=section, sides=sides,
                     reps=3, seconds=windows.DEFAULT_SECONDS, models=("mlp", "cnn"), modes=("async", "sync"))


if __name__ == "__main__":
    sys.exit(main())
