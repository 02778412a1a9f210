"""Shell completion for bash, zsh and fish, by argcomplete: the shell's script (printed by
``tfdist-tui completion SHELL``) runs the command itself with ``_ARGCOMPLETE`` set, and
:func:`complete_if_asked` answers from the same argparse parsers the command parses with,
so completion cannot drift from the options. Also the package's version, for ``--version``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping

from tui.common.exit_codes import ExitCode

#: The shells whose completion script argcomplete writes and this command was tried with.
SHELLS = ("bash", "zsh", "fish")
#: The name the scripts complete: the console script of pyproject.toml.
COMMAND = "tfdist-tui"

ParserFactory = Callable[[], argparse.ArgumentParser]


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's), or ``unknown`` when the
    package runs from a checkout that was never installed."""
    from importlib import metadata  # (with its email and zipfile modules: only for --version)

    try:
        return metadata.version("tfdist-tui")
    except metadata.PackageNotFoundError:
        return "unknown"


def complete_if_asked(main_parser: ParserFactory, subcommands: Mapping[str, ParserFactory]) -> None:
    """When a shell's completion script runs the command, print the completions and exit;
    otherwise return at once. The first word picks the parser: a subcommand's own once it is
    written out, else the main command's (whose first argument completes to the subcommands'
    names and to files)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete  # only when completing: every other start skips its import

    words = _words_before_cursor()
    first = int(os.environ["_ARGCOMPLETE"])  # where the command's own arguments start
    if len(words) > first + 1 and words[first] in subcommands:
        tree = argparse.ArgumentParser(prog=COMMAND)
        choices = tree.add_subparsers(dest="command")
        for name, make in subcommands.items():
            # Each subcommand's parser as a parent: its own options, help included.
            choices.add_parser(name, parents=[make()], add_help=False)
        argcomplete.autocomplete(tree)
    else:
        parser = main_parser()
        for action in parser._actions:
            if action.dest == "hosts":
                action.completer = _HostsOrCommand(sorted(subcommands))  # type: ignore[attr-defined]
        argcomplete.autocomplete(parser)


class _HostsOrCommand:
    """The main command's first argument: a subcommand's name or a hosts.yaml file."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __call__(self, prefix: str, **_: object) -> list[str]:
        import argcomplete

        files = argcomplete.completers.FilesCompleter(("yaml", "yml"))(prefix)
        return [name for name in self.names if name.startswith(prefix)] + list(files)


def _words_before_cursor() -> list[str]:
    """The command line's words up to the cursor; an empty last word when the cursor
    follows a space (a new word is being started)."""
    line = os.environ.get("COMP_LINE", "")
    point = int(os.environ.get("COMP_POINT", len(line)))
    before = line[:point]
    try:
        words = shlex.split(before)
    except ValueError:  # an open quote: the word being written
        words = before.split()
    if before[-1:].isspace() or not words:
        words.append("")
    return words


def completion_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{COMMAND} completion",
        description="Print the script that makes the shell complete tfdist-tui's subcommands, "
                    "options and their values. Load it from the shell's start-up file: "
                    'bash: eval "$(tfdist-tui completion bash)" in ~/.bashrc; zsh: the same in '
                    "~/.zshrc; fish: tfdist-tui completion fish | source in "
                    "~/.config/fish/config.fish.")
    parser.add_argument("shell", choices=SHELLS)
    return parser


def completion_main(argv: list[str]) -> int:
    """``tfdist-tui completion SHELL``; returns the exit code."""
    try:
        args = completion_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    import argcomplete

    sys.stdout.write(argcomplete.shellcode([COMMAND], shell=args.shell))
    return ExitCode.OK
