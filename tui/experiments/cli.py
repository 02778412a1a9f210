"""The experiment subcommands: ``tfdist-tui sweep`` and ``tfdist-tui compare``.

:func:`tui.cli.main` hands the rest of the command line to :func:`sweep_main` or
:func:`compare_main` (see :data:`tui.cli.SUBCOMMANDS`). Mistakes print ``error: ...`` and
exit 2, like the main command.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TextIO

from tui import headless
from tui.common.exit_codes import ExitCode
from tui.common.private import own_private_dir, replace_file
from tui.common.terminal import inert, wants_colour
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.core.options import RunOptions
from tui.experiments import compare
from tui.experiments.finished_runs import FinishedRun, RunDirError, read_run
from tui.experiments.sweep import (
    Axis,
    PointState,
    SweepState,
    grid,
    parse_axis,
    point_config,
    run_points,
    sweep_id,
)
from tui.interop.textcommand import positive_int, positive_seconds


def _axis(text: str) -> Axis:
    try:
        return parse_axis(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sweep_parser() -> argparse.ArgumentParser:
    sweep = argparse.ArgumentParser(
        prog="tfdist-tui sweep",
        description="Run every combination of the --set values headless, each in its own run "
                    "directory, then print and write the comparison. Running the same command "
                    "again resumes an interrupted sweep.")
    sweep.add_argument("hosts", metavar="HOSTS.yaml", type=Path)
    sweep.add_argument("--set", dest="axes", metavar="NAME=V1,V2", type=_axis, action="append",
                       required=True, help="a training setting (mode, partitions, steps, ...) or "
                                           "'workers' (how many of the config's workers to use)")
    sweep.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                       help="run each combination N times (default 1)")
    sweep.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                       help="stop a point after this long (it counts as failed)")
    sweep.add_argument("--run-dir", type=Path, metavar="DIR",
                       help="where the sweep directory goes (default: run_dir in the config)")
    return sweep


def compare_parser() -> argparse.ArgumentParser:
    comparison = argparse.ArgumentParser(
        prog="tfdist-tui compare",
        description="One table and two charts for the given run directories; also written as HTML.")
    comparison.add_argument("runs", metavar="RUN_DIR", type=Path, nargs="+")
    comparison.add_argument("--html", type=Path, metavar="FILE",
                            help="where the HTML page goes (default: comparison.html beside "
                                 "the first run directory)")
    return comparison


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE


def compare_main(argv: list[str]) -> int:
    """``tfdist-tui compare RUN_DIR... [--html FILE]``; the exit code."""
    args = _parse(compare_parser(), argv)
    if isinstance(args, int):
        return args
    paths: list[Path] = args.runs
    try:
        runs = [read_run(path) for path in paths]
    except RunDirError as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    report(runs, sys.stdout, args.html or paths[0].resolve().parent / compare.COMPARISON_HTML)
    return ExitCode.OK


def report(runs: list[FinishedRun], out: TextIO, html: Path) -> None:
    """Print the comparison and write its HTML page to ``html``."""
    comparison = compare.compare(runs)
    compare.render_text(comparison, out, colour=wants_colour(out))
    replace_file(html, compare.render_html(comparison), mode=0o644)  # never through a planted link
    out.write(f"comparison written to {html}\n")


def sweep_main(argv: list[str]) -> int:
    """``tfdist-tui sweep HOSTS.yaml --set NAME=V1,V2 ...``; the exit code."""
    args = _parse(sweep_parser(), argv)
    if isinstance(args, int):
        return args
    # asyncssh logs whole remote commands at INFO, env values from hosts.yaml included.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    return _sweep(args, sys.stdout)


def _sweep(args: argparse.Namespace, out: TextIO) -> int:
    names = [axis.name for axis in args.axes]
    try:
        if len(set(names)) != len(names):
            raise ConfigError("command line", None, None, "--set: a setting is given twice")
        config = load_config(args.hosts)
        points = grid(args.axes, args.repeat)
        configs = [point_config(config, point) for point in points]
    except ConfigError as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    root = args.run_dir or config.run_dir
    folder = root / f"sweep-{sweep_id(config, args.axes, args.repeat)}"
    try:
        own_private_dir(folder)  # before reading a sweep.json that could have been planted
    except OSError as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    state = SweepState.open(folder, points)
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
            out.write(inert(f"{record.point.label}: {exc}\n", newlines=True))
    if runs:
        comparison = compare.compare(runs)
        compare.render_text(comparison, out, colour=wants_colour(out))
        text, page = compare.write_files(comparison, state.folder)
        out.write(f"comparison written to {text} and {page}\n")
    return int(code)
