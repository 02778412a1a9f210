"""The app's core process (``python -m tui.core.process_main FD``) as shipped, except that
its tasks run tests/support/fake_trainer.py: what tests/support/fake_cli.py starts."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.fake_cli import use_fake_trainer
from tui.core import process_main

if __name__ == "__main__":
    use_fake_trainer()
    sys.exit(process_main.main())
