"""The plumbing of the command lines: argument types every command shares, and for the
subcommands that turn one file into another text (``export``, ``import``): parse the
arguments, make the text, print it or write it to ``-o``. Mistakes print ``error: ...`` and
exit 2, as the main command's do."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tui.common.exit_codes import ExitCode
from tui.common.terminal import inert


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``-o/--output`` and ``--force``."""
    parser.add_argument("-o", "--output", type=Path, help=f"write {what} here (default: stdout)")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")


def run(parser: argparse.ArgumentParser, argv: list[str],
        make: Callable[[argparse.Namespace], str], errors: tuple[type[Exception], ...]) -> int:
    """Parse ``argv``, call ``make`` and print or write its text; ``errors`` are the
    exceptions ``make`` raises for bad input (their text is the message). Returns the exit code."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    output: Path | None = args.output
    if output is not None and output.exists() and not args.force:
        print(f"error: {output} exists; pass --force to overwrite it", file=sys.stderr)
        return ExitCode.USAGE
    try:
        text = make(args)
    except errors as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    if output is None:
        sys.stdout.write(text)
        return ExitCode.OK
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"error: {output}: cannot be written: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK
