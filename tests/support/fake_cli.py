"""``tfdist-tui`` exactly as shipped, except that tasks run tests/support/fake_trainer.py
instead of ``python -m trainer``: lets the signal and exit-code tests run the whole
controller (config loading, headless front end, the app and its core's process, signals)
without TensorFlow."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui import cli
from tui.app import process_bridge
from tui.core import session
from tui.core.hosts import HostBoard
from tui.core.options import RunOptions
from tui.core.session import Session
from tui.core.supervisor.records import SupervisorOptions

FAKE_TRAINER = Path(__file__).resolve().parent / "fake_trainer.py"
#: The app's core process, with the same seam (tests/support/fake_core.py).
FAKE_CORE = Path(__file__).resolve().parent / "fake_core.py"


def use_fake_trainer() -> None:
    """The one seam: every front end builds its session with Session.from_options. The
    command line's supervisor options (stall timeout, ...) are kept; only the trainer differs."""
    build = session.Session.from_options

    def from_options(options: RunOptions, supervisor_options: SupervisorOptions | None = None,
                     hosts: HostBoard | None = None) -> Session:
        base = supervisor_options or options.supervisor_options()
        return build(options, dataclasses.replace(base, trainer_argv=[str(FAKE_TRAINER)], program=None),
                     hosts=hosts)

    session.Session.from_options = from_options  # type: ignore[method-assign]


def fake_core_argv(fd: int, python: str = sys.executable) -> list[str]:
    """The app's core process, as tests/support/fake_core.py."""
    return [python, str(FAKE_CORE), str(fd)]


if __name__ == "__main__":
    use_fake_trainer()
    process_bridge.core_argv = fake_core_argv
    sys.exit(cli.main())
