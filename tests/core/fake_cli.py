"""``tfdist-tui`` exactly as shipped, except that tasks run tests/core/fake_trainer.py
instead of ``python -m trainer``: lets the signal and exit-code tests run the whole
controller (config loading, headless front end, signals) without TensorFlow."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui import cli, session
from tui.supervisor import SupervisorOptions

FAKE_TRAINER = Path(__file__).resolve().parent / "fake_trainer.py"

if __name__ == "__main__":
    # The one seam: every front end builds its session with Session.from_options.
    session.Session.from_options = functools.partial(  # type: ignore[method-assign]
        session.Session.from_options, supervisor_options=SupervisorOptions(trainer_argv=[str(FAKE_TRAINER)]))
    sys.exit(cli.main())
