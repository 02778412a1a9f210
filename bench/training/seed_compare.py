"""Our trainer versus the seed-style program (:mod:`bench.training.seed_style`: feed_dict batches,
``MonitoredTrainingSession`` with its defaults) on the same model, data and cluster:
examples/sec ratio, both measured the same way from their step events (see
:mod:`bench.training.throughput`) while every worker trains. The trainer side is the bare trainer,
so that no controller stands between the two programs. Target: >= 1.0.

    python -m bench.training.seed_compare [--reps 3] [--window 10] [--models mlp,cnn] [--modes async]
"""

from __future__ import annotations

import sys

from bench.harness import window as windows
from bench.harness.report import Figure, Section, Target, table, within_noise
from bench.training.campaign import Campaign, paired, per_rep, run_alone
from bench.training.run_records import Side
from bench.training.throughput import examples_per_sec, window_cell

#: At its default size, on 2 cores.
RUN_TIME = "about 6 min"

TARGET = Target(">=", 1.0)
COMMAND = "python -m bench.training.seed_compare"
#: When the trainer was slower in every repetition: what differs per step (not measured
#: one by one here).
SLOWER = ("the trainer was slower in every repetition; per step it differs from the seed-style "
          "program in its tf.data input pipeline (shuffle, batch, prefetch on the worker, "
          "threads competing for the same two cores as the three tasks), its global-step "
          "update (assign_add with use_locking) and its device filters; which of these costs "
          "is not measured here")


def sides(model: str, mode: str) -> tuple[Side, ...]:
    """The sides this benchmark needs: the bare trainer and the seed-style program."""
    return (Side.BARE, Side.SEED)


def section(campaign: Campaign, command: str = COMMAND) -> Section:
    """The trainer-versus-seed part of BENCHMARKS.md, from the campaign's runs."""
    intro = (
        "Same model (built by `trainer/models.py`), same data (`trainer/data.py`), same "
        f"batch size, optimizer and learning rate, same 1 ps + {campaign.workers_label}; the seed-style "
        "program feeds numpy batches through `feed_dict` into a `MonitoredTrainingSession` "
        "with its defaults, the trainer reads them from its `tf.data` pipeline. Both are "
        "measured over their windows (see section 2), the trainer's "
        f"{campaign.plan.window:g} s or more; a seed-style run has no natural end (its ps "
        "joins forever): it is stopped once its window is as long as the bare trainer's of "
        "the same repetition.")
    result = Section("3. Our trainer versus the seed-style program", command, intro)
    attempted = campaign.plan.reps
    rows = []
    for config in campaign.configs:
        if not (campaign.has(config, Side.BARE) and campaign.has(config, Side.SEED)):
            continue
        samples = paired(campaign, config, Side.BARE, Side.SEED, examples_per_sec)
        figure = Figure(f"{config.label}: trainer / seed-style, examples/sec", samples,
                        attempted=attempted, target=TARGET,
                        held_back=within_noise(samples, TARGET) or SLOWER)
        result.figures.append(figure)
        rows.append([config.label,
                     Figure("", per_rep(campaign, config, Side.BARE, examples_per_sec), digits=0,
                            attempted=attempted).cell(),
                     Figure("", per_rep(campaign, config, Side.SEED, examples_per_sec), digits=0,
                            attempted=attempted).cell(),
                     figure.cell(), window_cell(campaign, config, Side.BARE),
                     window_cell(campaign, config, Side.SEED)])
    result.tables.append(table(["configuration", "trainer, examples/s", "seed-style, examples/s",
                                "trainer / seed-style", "window (trainer)", "window (seed-style)"], rows))
    return result


def main(argv: list[str] | None = None) -> int:
    """Run this benchmark alone and print its section."""
    return run_alone(argv, command=COMMAND, doc=__doc__, section=section, sides=sides,
                     reps=3, seconds=windows.DEFAULT_SECONDS, models=("mlp", "cnn"), modes=("async",))


if __name__ == "__main__":
    sys.exit(main())
