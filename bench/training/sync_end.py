"""Sync end: seconds from the last global step until every process has exited, in sync and
async mode. For the bare trainer, until each of its tasks has exited (ps included: they
leave by themselves once every worker has said it is done); for the controller
(``--no-ui``), until the controller process itself has exited, which it does only after
every task it started. The seed programs' ps never exit (``server.join()``), and their sync
chief can wait minutes for tokens (``shared/TF_NOTES.md``): no seed side here.
Target: <= 3 s (what ``tests/trainer/test_cluster_runs.py`` holds every process to).

    python -m bench.training.sync_end [--reps 3] [--window 1] [--models mlp] [--modes async,sync]
"""

from __future__ import annotations

import sys

from bench.harness.report import Figure, Section, Target, table
from bench.training import run_records
from bench.training.campaign import Campaign, per_rep, run_alone
from bench.training.run_records import Side

#: At its default size, on 2 cores.
RUN_TIME = "about 3 min"

TARGET = Target("<=", 3.0, " s")
COMMAND = "python -m bench.training.sync_end"
SIDES = (Side.BARE, Side.HEADLESS)


def sides(model: str, mode: str) -> tuple[Side, ...]:
    """The sides this benchmark needs: bare and the controller."""
    return SIDES


def section(campaign: Campaign, command: str = COMMAND) -> Section:
    """The sync-end part of BENCHMARKS.md, from the campaign's runs."""
    intro = (
        "From the last `step` event of any worker (its own timestamp) until every process has "
        "exited: for the bare trainer, each task (exit times recorded by the benchmark as "
        "they happen); for the controller, the `tfdist-tui --no-ui` process itself, which "
        "exits after every task it started has exited and the run directory is written.")
    result = Section("6. Sync end", command, intro)
    attempted = campaign.plan.reps
    rows = []
    for config in campaign.configs:
        cells = []
        for side in SIDES:
            if not campaign.has(config, side):
                cells.append("")
                continue
            figure = Figure(f"{config.label}: {side.label}, last step to every process exited",
                            per_rep(campaign, config, side, run_records.end_seconds), unit=" s",
                            attempted=attempted, target=TARGET,
                            held_back="see the per-task exit times in the run directories")
            result.figures.append(figure)
            cells.append(figure.cell())
        if any(cells):
            rows.append([config.label, *cells])
    result.tables.append(table(["configuration", "bare trainer: every task exited",
                                "controller --no-ui: the controller exited"], rows))
    return result


def main(argv: list[str] | None = None) -> int:
    """Run this benchmark alone and print its section."""
    return run_alone(argv, command=COMMAND, doc=__doc__, section=section, sides=sides,
                     reps=3, seconds=1.0, models=("mlp",), modes=("async", "sync"))


if __name__ == "__main__":
    sys.exit(main())
