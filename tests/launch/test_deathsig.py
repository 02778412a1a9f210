"""Starting a task so that it dies with the controller: behind setpriv where there is one
(no pre-exec hook, so Python can vfork), with the same errors as starting it directly.
That the task really dies with a SIGKILLed controller, stopped or not, is shown by
tests/test_controller_process.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tui.launch import deathsig
from tui.launch.deathsig import dying_with_parent

needs_setpriv = pytest.mark.skipif(deathsig.SETPRIV is None, reason="no setpriv on this machine")


@needs_setpriv
def test_a_task_starts_behind_setpriv_without_a_hook() -> None:
    command, hook = dying_with_parent([sys.executable, "-c", "pass"], os.environ.get("PATH"))
    assert command == [deathsig.SETPRIV, "--pdeathsig", "KILL", "--", sys.executable, "-c", "pass"]
    assert hook is None


@needs_setpriv
def test_a_program_that_cannot_run_fails_as_it_would_without_setpriv(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        dying_with_parent(["no-such-program-here"], "/usr/bin:/bin")
    with pytest.raises(FileNotFoundError):
        dying_with_parent(["./train.py"], None, str(tmp_path))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    with pytest.raises(PermissionError):  # not executable
        dying_with_parent(["./train.py"], None, str(tmp_path))
    with pytest.raises(PermissionError):
        dying_with_parent([str(tmp_path)], None)
    script.chmod(0o755)
    assert dying_with_parent(["./train.py"], None, str(tmp_path))[0][-1] == "./train.py"
    # A bare name is looked up in the task's own PATH, not the controller's.
    assert dying_with_parent(["train.py"], str(tmp_path))[0][-1] == "train.py"
