"""The SSH launcher belongs to the controller core: importing it loads neither Textual nor
TensorFlow (a controller machine needs neither to drive remote hosts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULES = ["tui.launch.router", "tui.launch.ssh.launcher", "tui.launch.ssh.deploy",
           "tui.launch.leftover_search"]


def test_the_ssh_launcher_imports_neither_textual_nor_tensorflow() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "from tui.launch.ssh.deploy import local_package\n"
        "local_package()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    modules = set(json.loads(result.stdout))
    assert not {m for m in modules if m.split(".")[0] in ("textual", "tensorflow", "keras")}
    # Only the stdlib-only halves of the task contract: events, settings, thread variables.
    contract = {"trainer.protocol", "trainer.settings", "trainer.threads", "trainer.shim", "trainer.warm",
                "trainer.warm.wire"}
    assert {m for m in modules if m.startswith("trainer.")} <= contract
