"""The experiment subcommands: ``tfdist-tui sweep`` and ``tfdist-tui compare``.

:func:`tui.cli.main` hands the command line here when its first word is one of
:data:`COMMANDS`. Mistakes print ``error: ...`` and exit 2, like the main command.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TextIO

from tui import compare, headless
from tui.config import ClusterConfig, ConfigError, load_config
from tui.options import ExitCode, RunOptions
from tui.runinfo import RunDirError, RunRecord, read_run
from tui.sweep import Axis, PointState, SweepState, grid, parse_axis, point_config, run_points, sweep_id

COMMANDS = ("sweep", "compare")


def _axis(text: str) -> Axis:
    try:
        return parse_axis(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfdist-tui", description="Experiments over runs.")
    commands = parser.add_subparsers(dest="command", required=True)
    sweep = commands.add_parser(
        "sweep", help="run every combination of settings, one after another, and compare them",
        description="Run every combination of the --set values headless, each in its own run "
                    "directory, then print and write the comparison. Running the same command "
                    "again resumes an interrupted sweep.")
    sweep.add_argument("hosts", metavar="HOSTS.yaml", type=Path)
    sweep.add_argument("--set", dest="axes", metavar="NAME=V1,V2", type=_axis, action="append",
                       required=True, help="a training setting (mode, partitions, steps, ...) or "
                                           "'workers' (how many of the config's workers to use)")
    sweep.add_argument("--repeat", type=_positive_int, default=1, metavar="N",
                       help="run each combination N times (default 1)")
    sweep.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS",
                       help="stop a point after this long (it counts as failed)")
    sweep.add_argument("--run-dir", type=Path, metavar="DIR",
                       help="where the sweep directory goes (default: run_dir in the config)")
    comparison = commands.add_parser("compare", help="compare finished runs side by side",
                                     description="One table and two charts for the given run "
                                                 "directories; also written as HTML.")
    comparison.add_argument("runs", metavar="RUN_DIR", type=Path, nargs="+")
    comparison.add_argument("--html", type=Path, metavar="FILE",
                            help="where the HTML page goes (default: comparison.html beside "
                                 "the first run directory)")
    return parser


def main(argv: list[str]) -> int:
    """Run ``sweep`` or ``compare``; the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    if args.command == "compare":
        return compare_main(args.runs, args.html, sys.stdout)
    return sweep_main(args, sys.stdout)


def compare_main(paths: list[Path], html: Path | None, out: TextIO) -> int:
    try:
        runs = [read_run(path) for path in paths]
    except RunDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    report(runs, out, html or paths[0].resolve().parent / compare.COMPARISON_HTML)
    return ExitCode.OK


def report(runs: list[RunRecord], out: TextIO, html: Path) -> None:
    """Print the comparison and write its HTML page to ``html``."""
    comparison = compare.compare(runs)
    compare.render_text(comparison, out, colour=_colour(out))
    html.write_text(compare.render_html(comparison), encoding="utf-8")
    out.write(f"comparison written to {html}\n")


def sweep_main(args: argparse.Namespace, out: TextIO) -> int:
    names = [axis.name for axis in args.axes]
    try:
        if len(set(names)) != len(names):
            raise ConfigError("command line", None, None, "--set: a setting is given twice")
        config = load_config(args.hosts)
        points = grid(args.axes, args.repeat)
        configs = [point_config(config, point) for point in points]
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    root = args.run_dir or config.run_dir
    state = SweepState.open(root / f"sweep-{sweep_id(config, args.axes, args.repeat)}", points)
    done = sum(r.state.is_done for r in state.records)
    out.write(f"sweep of {len(points)} points in {state.folder}"
              + (f" (resuming: {done} done)" if done else "") + "\n")
    state.save()

    async def run_point(point_config: ClusterConfig, folder: Path, log: TextIO) -> int:
        options = RunOptions(config=point_config, runs_root=folder, timeout=args.timeout)
        return int(await headless.run_headless(options, out=log, err=log))

    try:
        code = asyncio.run(run_points(state, configs, run_point, out))
    except KeyboardInterrupt:  # between two points: the next run resumes
        out.write(f"interrupted; run the same command again to resume the sweep in {state.folder}\n")
        return ExitCode.INTERRUPTED
    runs = []
    for record in state.records:
        if record.run_dir is None:
            if record.state is PointState.FAILED:
                out.write(f"{record.point.label}: failed before running (exit code "
                          f"{record.exit_code}); see {state.folder / record.point.folder}\n")
            continue
        try:
            runs.append(read_run(Path(record.run_dir)))
        except RunDirError as exc:
            out.write(f"{record.point.label}: {exc}\n")
    if runs:
        comparison = compare.compare(runs)
        compare.render_text(comparison, out, colour=_colour(out))
        text, page = compare.write_files(comparison, state.folder)
        out.write(f"comparison written to {text} and {page}\n")
    return int(code)


def _colour(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ
