"""``python -m bench``: run every benchmark and write BENCHMARKS.md. ``python -m bench --list``
names every benchmark with its run time; ``python -m bench NAME [ARGS]`` runs one
(``controller.flood``, or ``flood`` where that is unique).

1. time to first step (:mod:`bench.controller.startup`), 2. throughput under supervision
(:mod:`bench.training.throughput`), 3. our trainer versus the seed-style program
(:mod:`bench.training.seed_compare`) and 6. sync end (:mod:`bench.training.sync_end`) read their figures from
one campaign of interleaved cluster runs (:mod:`bench.training.campaign`): in every repetition each
configuration (mlp and cnn, async and sync) runs on the bare trainer, under the controller
(``--no-ui``) and under the Textual app, and (async) as the seed-style program, one after
the other. Then 5. the log flood (:mod:`bench.controller.flood`) and 4. placement balance
(:mod:`bench.training.placement`).

Every run trains for a measurement window of ``--window`` seconds (default 10) once warm,
its step target calibrated on this machine first (:mod:`bench.training.campaign`). The default size
takes about 20 minutes on 2 cores (4 calibration runs and 42 cluster runs); ``--reps``,
``--window`` and the flood's size make it shorter (the smoke test runs it tiny).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.controller import flood, startup
from bench.harness import catalog
from bench.harness import window as windows
from bench.harness.report import Figure, Machine, Section, Stamp, Target, load_average, merge, with_targets
from bench.training import placement, seed_compare, sync_end, throughput
from bench.training.campaign import Plan, run_campaign, size_arguments, size_from
from bench.training.run_records import Side

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"
FLOOD_P99_TARGET = Target("<", 100.0, " ms")
ALL_PS_COUNTS = placement.PS_COUNTS


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line: the campaign's size, the flood's and placement's, the output."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    size_arguments(parser, reps=3, seconds=windows.DEFAULT_SECONDS, models=("mlp", "cnn"),
                   modes=("async", "sync"))
    parser.add_argument("--seed-modes", default="async",
                        help="modes that also run the seed-style program (default %(default)s)")
    parser.add_argument("--flood-tasks", type=int, default=8, help="log flood: tasks (default 8)")
    parser.add_argument("--flood-rate", type=float, default=1000.0,
                        help="log flood: lines/s per task (default 1000)")
    parser.add_argument("--flood-seconds", type=float, default=30.0,
                        help="log flood: seconds (default 30)")
    parser.add_argument("--placement-models", default="cnn,vgg19",
                        help="placement: comma-separated models (default %(default)s)")
    parser.add_argument("--placement-ps", default=",".join(str(n) for n in ALL_PS_COUNTS),
                        help="placement: comma-separated ps counts (default %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="where to write the report (default: the repository's BENCHMARKS.md)")
    return parser.parse_args(argv)


def flood_section(result: flood.FloodResult, command: str, load: str) -> Section:
    """Section 5 from one flood measurement (``load``: the load average right after it)."""
    missing = Figure("lines missing from the run directory", (float(result.missing_lines),),
                     digits=0, target=Target("<=", 0),
                     held_back="the run directory lost lines: a bug, see tui/core/rundir.py")
    p99 = Figure("keypress latency under flood, p99", (result.flood_p99_ms,), unit=" ms", digits=1,
                 target=FLOOD_P99_TARGET,
                 held_back=f"one measurement, not repeated: the app shared the 2 cores with the "
                           f"{result.tasks} flooding tasks and whatever else ran on this shared "
                           f"machine (1-minute load average {load} right after the flood); "
                           f"p50 under flood was {result.flood_p50_ms:.1f} ms and the idle p99 "
                           f"{result.idle_p99_ms:.1f} ms, so the tail, not the typical press, "
                           "is what is slow")
    text = (f"{result.tasks} stand-in tasks (`bench/controller/flood_task.py`: the trainer's "
            "start-up protocol, then numbered lines with ANSI colour codes) each print "
            f"{result.rate:,.0f} lines/s for {result.seconds:g} s into the real app (Textual's "
            "headless test driver), supervised by the real supervisor on its own thread. A key "
            "press is timed from its arrival in the app's queue until the pane it switches has "
            "changed. One measurement (the p99 flood / idle ratio compares across machines).")
    section = Section("5. Log flood into the Textual app", command, text,
                      tables=[result.table()], figures=[missing, p99])
    section.notes.append(
        "Why it holds: the supervisor parses task output on its own thread and event loop "
        "(`tui/app/bridge.py`), the app folds what arrived into bounded buffers ten times a "
        "second (`tui/app/state.py`), and only the visible log pane gets the new lines.")
    return section


def placement_section(models: tuple[str, ...], ps_counts: tuple[int, ...], command: str) -> Section:
    """Section 4: max/mean bytes per ps from the graphs a real run builds."""
    text = ("Max/mean parameter bytes per ps (1.00 is perfect; N at N ps means one ps holds "
            "everything), from the graph a real run builds (`trainer plan`), VGG19 at 224x224x3. "
            "Deterministic: no repetitions needed.")
    section = Section("4. Placement balance", command, text,
                      tables=[placement.table(models=models, ps_counts=ps_counts)])
    section.notes.append(
        "The round_robin, partitions 1 rows reproduce `../shared/TF_NOTES.md` (TensorFlow's "
        "default). Unpartitioned, greedy cannot help much: one layer (the CNN's fc1, VGG19's "
        "fc6) outweighs all others. Partitioned, TensorFlow's own figures at 8 ps are 1.11 "
        "(cnn) and 1.02 (vgg19): its conv kernels `[5, 5, in, out]` stay whole because their "
        "first dimension is below the shard count; ours are split along their largest "
        "dimension instead, which is what brings 8 ps to 1.00. `tests/trainer/test_graph.py` "
        "holds greedy with partitions = ps to <= 1.05 in every cell.")
    return section


def render(machine: Machine, command: str, minutes: float, loads: tuple[str, str], reps: int,
           sections: list[Section], failures: list[str]) -> str:
    """This run's BENCHMARKS.md: the heading part, the Targets built from the sections, and
    the sections, each stamped with this run (:func:`bench.harness.report.merge` puts them
    into a report that holds other benchmarks' sections too)."""
    stamp = Stamp(time.strftime("%Y-%m-%d", time.gmtime()), machine.describe(),
                  f"1-minute load average {loads[0]} at the start of `{command}`, {loads[1]} "
                  f"at its end ({minutes:.1f} minutes)")
    ordered = sorted(sections, key=lambda s: s.title)
    for section in ordered:
        section.stamp = stamp
    parts = [
        "# Benchmarks",
        "",
        "Each section names the run that produced it on its first line: the date, the machine "
        "and how busy the machine was (it is shared). `python -m bench` writes the sections of "
        "its campaign (time to first step, throughput, the seed-style program, placement, the log "
        "flood, sync end) in one run:",
        "",
        "```sh",
        command,
        "```",
        "",
        "Others are written by their own commands (`python -m bench --list`), each with the "
        "stamp of its own run.",
        "",
        "The machines are shared and noisy, so every cluster figure is a ratio of two things "
        "measured side by side in the same run: each repetition runs every configuration on "
        "every side one after the other (bare, controller, app, seed-style, then again), so "
        "that machine noise hits all alike. Figures are the median over "
        f"{reps} repetitions, with the minimum and maximum in brackets; a ratio is taken "
        "within one repetition, then the median of those ratios is quoted.",
        "",
    ]
    parts += [s.markdown(within_report=True) for s in ordered]
    if failures:
        parts += ["## Failed runs", "", "Their figures are missing from the tables above "
                  "(marked `[n of m runs]`):", ""]
        parts += [f"- {f}" for f in failures]
        parts.append("")
    return with_targets("\n".join(parts).rstrip() + "\n")


def _without_output(args: list[str]) -> list[str]:
    """The command line minus ``--output FILE``: the report names its command, not its path."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--output":
            skip = True
        elif not arg.startswith("--output="):
            kept.append(arg)
    return kept


@dataclass
class Report:
    """What one ``python -m bench`` produced: the sections (with their figures), the
    failed runs, and the Markdown written from them."""

    sections: list[Section]
    failures: list[str]
    text: str
    #: The tag of every cluster run, the calibration runs' too (see
    #: :data:`bench.harness.processes.TAG_ENV`).
    tags: list[str]

    @property
    def figures(self) -> list[Figure]:
        """Every figure of every section."""
        return [f for s in self.sections for f in s.figures]


def generate(argv: Sequence[str]) -> Report:
    """Run every benchmark at the size ``argv`` asks for; nothing is written."""
    args_list = list(argv)
    args = parse_args(args_list)
    size = size_from(args)
    command = shlex.join(["python", "-m", "bench", *_without_output(args_list)])
    seed_modes = {m.strip() for m in args.seed_modes.split(",") if m.strip()}
    started = time.monotonic()
    loads = [load_average()]
    machine = Machine.here()
    print(f"machine: {machine.describe()}", file=sys.stderr)

    def sides(model: str, mode: str) -> tuple[Side, ...]:
        return (Side.BARE, Side.HEADLESS, Side.APP, *((Side.SEED,) if mode in seed_modes else ()))

    plan = Plan.build(size.models, size.modes, sides, reps=size.reps, seconds=size.window,
                      workers=size.workers)
    print(f"cluster runs: {plan.runs}", file=sys.stderr)
    campaign = run_campaign(plan)
    sections = [startup.section(campaign), throughput.section(campaign),
                seed_compare.section(campaign), sync_end.section(campaign)]

    print("log flood…", file=sys.stderr)
    result = asyncio.run(flood.measure(args.flood_tasks, args.flood_rate, args.flood_seconds))
    sections.append(flood_section(result, f"python -m bench.controller.flood --tasks {args.flood_tasks} "
                                          f"--rate {args.flood_rate:g} --seconds {args.flood_seconds:g}",
                                  load_average()))
    print("placement…", file=sys.stderr)
    models = tuple(m.strip() for m in args.placement_models.split(",") if m.strip())
    ps_counts = tuple(int(n) for n in args.placement_ps.split(",") if n.strip())
    sections.append(placement_section(models, ps_counts, "python -m bench.training.placement"))

    loads.append(load_average())
    text = render(machine, command, (time.monotonic() - started) / 60, (loads[0], loads[1]),
                  size.reps, sections, campaign.failures())
    return Report(sections, campaign.failures(), text,
                  [r.tag for r in (*campaign.calibration, *campaign.records)])


def main(argv: Sequence[str] | None = None) -> int:
    """``--list``: name every benchmark; ``NAME [ARGS]``: run one; else run everything and
    write the report, exit 1 if any run failed (the report says which)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--list"]:
        print(catalog.listing(catalog.discover()))
        return 0
    if args_list and not args_list[0].startswith("-"):
        try:
            benchmark = catalog.find(args_list[0], catalog.discover())
        except catalog.UnknownBenchmark as error:
            print(f"python -m bench: {error}", file=sys.stderr)
            return 2
        catalog.run(benchmark, args_list[1:])
    output = parse_args(args_list).output
    report = generate(args_list)
    existing = output.read_text(encoding="utf-8") if output.exists() else ""
    output.write_text(merge(existing, report.text) if existing else report.text, encoding="utf-8")
    print(f"wrote {output}", file=sys.stderr)
    return 0 if not report.failures else 1


if __name__ == "__main__":
    sys.exit(main())
