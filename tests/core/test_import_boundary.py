"""The core and the headless front end never load Textual or TensorFlow: a headless run
on a machine without a display (or a controller host without TensorFlow) must work, and
start fast."""

from __future__ import annotations

import json
import subprocess
import sys

from .clirun import REPO

CORE = ["tui.supervisor", "tui.launch.local", "tui.launch.router", "tui.options", "tui.cli",
        "tui.headless", "tui.leftovers", "tui.rundir", "tui.events", "tui.plan", "tui.progress",
        "tui.session", "tui.commands", "tui.task_state", "tui.restart_policy"]


def test_core_imports_neither_textual_nor_tensorflow() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    modules = set(json.loads(result.stdout))
    assert not {m for m in modules if m.split(".")[0] in ("textual", "tensorflow", "keras")}
    assert not {m for m in modules if m.startswith("tui.app")}
    # asyncssh takes half a second to import: only a cluster with remote hosts pays for it.
    assert not {m for m in modules if m.split(".")[0] == "asyncssh"}
    # Standard-library-only trainer modules: the contract (flags, events, share variables, the
    # shim's bootstrap line).
    assert {m for m in modules if m.startswith("trainer.")} <= {"trainer.protocol", "trainer.settings",
                                                                 "trainer.threads", "trainer.shim"}
