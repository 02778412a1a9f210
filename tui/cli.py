"""``tfdist-tui HOSTS.yaml [options]``: parse the command line, load the config, and hand
it to a front end: headless with ``--no-ui``/``--json``, else the Textual app (imported
only then, so the core and headless mode never load Textual).

Exit codes are :class:`tui.options.ExitCode`; mistakes in the config or the arguments
print ``error: ...`` on stderr and exit 2, never with a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from trainer import settings as training_settings
from tui import commands
from tui.config import ConfigError, RestartMode, apply_overrides, load_config, with_restart_mode
from tui.options import ExitCode, RunOptions

#: Training settings the TUI can toggle, and therefore the command line can override.
OVERRIDES = ("mode", "partitions", "placement", "steps")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui",
        description="Start, watch and stop a distributed TensorFlow parameter-server cluster.",
        epilog="exit codes: 0 finished cleanly, 1 a task failed, 2 bad config or usage, "
               "3 timeout, 130 interrupted",
    )
    parser.add_argument("hosts", metavar="HOSTS.yaml", type=Path, help="the cluster description")
    parser.add_argument("--no-ui", action="store_true",
                        help="no terminal UI: prefixed task output, progress and a summary")
    parser.add_argument("--json", action="store_true",
                        help="print events as JSON lines (implies --no-ui)")
    parser.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS",
                        help="stop every task and exit 3 after this long")
    parser.add_argument("--mode", choices=training_settings.choices("mode"),
                        help="override training.mode")
    parser.add_argument("--partitions", type=_positive_int, metavar="N",
                        help="override training.partitions")
    parser.add_argument("--placement", choices=training_settings.choices("placement"),
                        help="override training.placement")
    parser.add_argument("--steps", type=_positive_int, metavar="N", help="override training.steps")
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
    parser.add_argument("--connect-timeout", type=_positive_seconds, default=10.0, metavar="SECONDS",
                        help="how long to wait for each SSH host (default 10)")
    parser.add_argument("--stop-leftovers", action="store_true",
                        help="stop tasks of earlier runs found still running on the hosts")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``tfdist-tui`` entry point; returns the exit code."""
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in commands.COMMANDS:
        return commands.main(words)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE

    try:
        config = load_config(args.hosts)
        config = apply_overrides(config, **{name: getattr(args, name) for name in OVERRIDES})
        if args.restart is not None:
            config = with_restart_mode(config, RestartMode(args.restart))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE

    options = RunOptions(config=config, runs_root=args.run_dir or config.run_dir, timeout=args.timeout,
                         json_output=args.json, accept_new_host_keys=args.accept_new_host_keys,
                         insecure_no_host_key_check=args.insecure_no_host_key_check,
                         connect_timeout=args.connect_timeout, stop_leftovers=args.stop_leftovers)
    # asyncssh logs whole remote commands at INFO, env values from hosts.yaml included.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)

    if args.no_ui or args.json:
        from tui import headless

        return headless.main(options)
    try:
        app = importlib.import_module("tui.app")
    except ImportError as exc:
        print(f"error: the terminal UI cannot be loaded ({exc}); use --no-ui for headless mode",
              file=sys.stderr)
        return ExitCode.USAGE
    return int(app.run(options))


if __name__ == "__main__":
    sys.exit(main())
