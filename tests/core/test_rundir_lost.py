"""A run whose directory is deleted while it runs has lost its record: the real controller
must end it as failed (exit 1), never as succeeded."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_signals import REPO, hosts, log_text, the_run
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_deleted_run_directory_fails_the_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("w") as sink:
        command = [sys.executable, "-m", "tui.cli", str(hosts(tmp_path, ticks=40)), "--no-ui"]
        process = subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)
        try:
            run = the_run(tmp_path)
            wait_until(lambda: "tick 3" in log_text(run, "worker0"), 60)
            # The run writes on meanwhile (a file made between rmtree's listing and its rmdir
            # leaves the folder "not empty"): removed again until it is gone.
            wait_until(lambda: (shutil.rmtree(run, ignore_errors=True), not run.exists())[1], 30,
                       "the run directory could not be removed")
            code = process.wait(90)
        finally:
            if process.poll() is None:
                process.kill()
    text = out.read_text()
    assert code == 1, text[-3000:]
    assert "run failed: run directory:" in text and "deleted" in text
