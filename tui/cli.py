"""``tfdist-tui HOSTS.yaml [options]``: parse the command line, load the config, and hand
it to a front end: headless with ``--no-ui``/``--json``, else the Textual app (imported
only then, so the core and headless mode never load Textual). ``tfdist-tui COMMAND ...``
runs a subcommand (:data:`SUBCOMMANDS`); shell completion is argcomplete's
(:mod:`tui.common.completion`).

Exit codes are :class:`tui.core.options.ExitCode`; mistakes in the config or the arguments
print ``error: ...`` on stderr and exit 2, never with a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from trainer import settings as training_settings
from tui.app.controls import TOGGLES
from tui.common.completion import complete_if_asked, package_version
from tui.common.exit_codes import ExitCode
from tui.common.terminal import inert
from tui.config.cluster import RestartMode
from tui.config.load import apply_overrides, load_config, with_restart_mode
from tui.config.restart_policy import DEFAULT_STALL_TIMEOUT, StallPolicy
from tui.config.yamlload import ConfigError
from tui.core.options import RunOptions
from tui.interop.textcommand import positive_int, positive_seconds
from tui.program.base import Setting


@dataclass(frozen=True)
class Subcommand:
    """``tfdist-tui <name> ...``: the function (``module:function``, imported only when
    used) that takes the rest of the command line and returns the exit code."""

    target: str
    #: One line for the main help's list of commands.
    summary: str
    #: ``module:function`` that makes the subcommand's parser (for shell completion).
    parser: str

    def run(self, argv: list[str]) -> int:
        module, _, function = self.target.partition(":")
        return int(getattr(importlib.import_module(module), function)(argv))

    def make_parser(self) -> argparse.ArgumentParser:
        """The subcommand's own parser, as its function parses with it."""
        module, _, function = self.parser.partition(":")
        parser: argparse.ArgumentParser = getattr(importlib.import_module(module), function)()
        return parser


#: The subcommands, by their first word; the main command is ``tfdist-tui HOSTS.yaml``.
SUBCOMMANDS = {
    "check": Subcommand("tui.plan.dryrun:check_main",
                        "check every host and print the plan, starting nothing",
                        "tui.plan.dryrun:check_parser"),
    "export": Subcommand("tui.interop.cli:export_main",
                         "print the cluster for another launcher (TFJob, TF_CONFIG, shell, sbatch)",
                         "tui.interop.cli:export_parser"),
    "import": Subcommand("tui.interop.cli:import_main",
                         "write a hosts.yaml from a TF_CONFIG or a TFJob manifest",
                         "tui.interop.cli:import_parser"),
    "sweep": Subcommand("tui.experiments.cli:sweep_main",
                        "run the cluster once per point of a grid of settings, then compare",
                        "tui.experiments.cli:sweep_parser"),
    "compare": Subcommand("tui.experiments.cli:compare_main",
                          "compare finished runs side by side", "tui.experiments.cli:compare_parser"),
    "schema": Subcommand("tui.config.schema:schema_main",
                         "print the JSON Schema of hosts.yaml (for editors)",
                         "tui.config.schema:schema_parser"),
    "completion": Subcommand("tui.common.completion:completion_main",
                             "print the shell's completion script (eval it in the shell's rc file)",
                             "tui.common.completion:completion_parser"),
}
#: Training settings the command line can override: those the TUI can toggle, and steps.
OVERRIDES = (*(t.setting.value for t in TOGGLES), "steps")


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, but the version is read only when asked for: reading
    the installed package's metadata costs a start (before its first line) some 25 ms."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    width = max(len(name) for name in SUBCOMMANDS) + 2
    commands = "\n".join(f"  {name:<{width}}{c.summary}" for name, c in SUBCOMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="tfdist-tui",
        usage="%(prog)s [options] HOSTS.yaml\n       %(prog)s COMMAND ...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Start, watch and stop a distributed TensorFlow parameter-server cluster.\n\n"
                    f"commands (tfdist-tui COMMAND --help for each):\n{commands}",
        epilog=textwrap.fill("exit codes: 0 finished cleanly, 1 a task failed, 2 bad config or usage, "
                             "3 timeout, 130 interrupted.", 78),
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show program's version number and exit")
    parser.add_argument("hosts", metavar="HOSTS.yaml", type=Path, help="the cluster description")
    parser.add_argument("--no-ui", action="store_true",
                        help="no terminal UI: prefixed task output, progress and a summary")
    parser.add_argument("--json", action="store_true",
                        help="print events as JSON lines (implies --no-ui)")
    parser.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                        help="stop every task and exit 3 after this long")
    for name in OVERRIDES:
        if training_settings.FIELD_TYPES[name] is bool:
            parser.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=None,
                                help=f"override training.{name}")
        elif choices := training_settings.choices(name):
            parser.add_argument(f"--{name}", choices=choices, help=f"override training.{name}")
        else:
            parser.add_argument(f"--{name}", type=positive_int, metavar="N",
                                help=f"override training.{name}")
    parser.add_argument("--restart", choices=[m.value for m in RestartMode],
                        help="override the restart policy of every job (counts and backoff "
                             "from hosts.yaml's restart: section, default 3 and 1 s)")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="where run directories go (default: run_dir in the config, else ./runs)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--accept-new-host-keys", action="store_true",
                      help="record the SSH host key of a host not yet in known_hosts (like OpenSSH's "
                           "StrictHostKeyChecking=accept-new); a changed key is still refused")
    keys.add_argument("--insecure-no-host-key-check", action="store_true",
                      help="do not verify SSH host keys at all (logged as a warning on every run)")
    parser.add_argument("--connect-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
                        help="how long to wait for each SSH host (default 10)")
    parser.add_argument("--anatomy", action="store_true",
                        help="headless: print each worker's sampled step anatomy (where its "
                             "step's time goes) as it comes")
    parser.add_argument("--cold", action="store_true",
                        help="start every task in a fresh interpreter (no warm pool that imported "
                             "TensorFlow once per host); hosts.yaml's warm: false does it per host")
    parser.add_argument("--tensorboard", action="store_true",
                        help="start TensorBoard for each run's directory (its address is printed); "
                             "it stops with the controller")
    parser.add_argument("--stop-leftovers", action="store_true",
                        help="stop tasks of earlier runs found still running on the hosts")
    parser.add_argument("--stall-timeout", type=_seconds_or_zero, default=DEFAULT_STALL_TIMEOUT,
                        metavar="SECONDS",
                        help="report a running task that makes no progress for this long (a quarter "
                             "of it while other workers progress; default 60, 0: never)")
    parser.add_argument("--on-stall", choices=[p.value for p in StallPolicy], default=StallPolicy.WARN.value,
                        help="what to do with a stalled task: warn (default), restart it (the "
                             "restart policy decides), or fail the run")
    return parser


def _seconds_or_zero(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else positive_seconds(text)


def main(argv: list[str] | None = None) -> int:
    """The ``tfdist-tui`` entry point; returns the exit code."""
    args_list = sys.argv[1:] if argv is None else argv
    complete_if_asked(build_parser, {name: c.make_parser for name, c in SUBCOMMANDS.items()})
    if args_list and args_list[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args_list[0]].run(args_list[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE

    try:
        config = load_config(args.hosts)
        config = apply_overrides(config, **{name: getattr(args, name) for name in OVERRIDES})
        if args.restart is not None:
            config = with_restart_mode(config, RestartMode(args.restart))
    except ConfigError as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    options = RunOptions(config=config, runs_root=args.run_dir or config.run_dir, timeout=args.timeout,
                         json_output=args.json, accept_new_host_keys=args.accept_new_host_keys,
                         insecure_no_host_key_check=args.insecure_no_host_key_check,
                         connect_timeout=args.connect_timeout, stop_leftovers=args.stop_leftovers,
                         cold=args.cold, anatomy=args.anatomy, tensorboard=args.tensorboard,
                         stall_timeout=args.stall_timeout, on_stall=StallPolicy(args.on_stall))
    program = options.program
    for setting in Setting:
        why = program.ignores(setting)
        if why and getattr(args, setting.value, None) is not None:
            # Said, not refused: the flag is harmless, and scripts may pass it to every run.
            print(inert(f"warning: --{setting.value}: {why}", newlines=True), file=sys.stderr)
    # asyncssh logs whole remote commands at INFO, env values from hosts.yaml included.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)

    if args.no_ui or args.json:
        from tui import headless

        return headless.main(options)
    # The core's process first, then Textual: the core, and with it this machine's warm
    # pools (Supervisor.prestart), start while the app loads (Textual and the app's modules:
    # a third of a CPU-second), so the pools' TensorFlow import overlaps it. (No Textual here.)
    from tui.app.process_bridge import ProcessBridge

    core: ProcessBridge | None = None
    with contextlib.suppress(OSError):  # (then the app starts it when it mounts, and says why not)
        core = ProcessBridge(options)
    try:
        app = importlib.import_module("tui.app.main")
    except ImportError as exc:
        if core is not None:
            core.close()
        print(f"error: the terminal UI cannot be loaded ({exc}); use --no-ui for headless mode",
              file=sys.stderr)
        return ExitCode.USAGE
    return int(app.run(options, core=core))


if __name__ == "__main__":
    sys.exit(main())
