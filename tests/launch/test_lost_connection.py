"""A ``shim: false`` task never reads its stdin, so EOF does not end it: when the controller
dies (SIGKILL: no chance to stop anything), the remote task must still go with its
connection, not run on as an orphan, even while it prints nothing (no EPIPE to end it)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from tests.support import async_wait_until, wait_until
from tests.support.ssh import SshServer, describe, kill, remote_processes, wait_nothing_left

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
STEADY = REPO / "tests" / "common" / "data" / "steady.py"


def steady_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any("steady.py" in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            continue
    return found


async def test_a_shim_false_task_dies_with_its_connection(sshd: SshServer, tmp_path: Path,
                                                          stub_tf: Path) -> None:
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(STEADY, folder / "steady.py")
    # (a TensorFlow that imports at once: the host's probe needs one, the task does not)
    host = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work", env={"PYTHONPATH": str(stub_tf)})
    hosts = folder / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({
        "hosts": {"far": {**sshd.yaml_entry(host), "kind": "ssh"}},
        "program": {"command": "python steady.py {job} --quiet-after 3", "shim": False, "upload": "."},
        "cluster": {"ps": ["localhost:auto"], "worker": ["far:auto"]},
        "run_dir": str(tmp_path / "runs")}))
    out = tmp_path / "out"
    with out.open("w") as sink:
        controller = subprocess.Popen([sys.executable, "-m", "tui.cli", str(hosts), "--no-ui"], cwd=REPO,
                                      stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "worker0 | tick 3" in out.read_text(), 90, what=lambda: out.read_text()[-2000:])
        assert [p for p in remote_processes(sshd.pid) if "steady.py" in " ".join(p.cmdline())]
        controller.send_signal(signal.SIGKILL)  # no stop, no goodbye: only the connection goes
        controller.wait(10)
    finally:
        if controller.poll() is None:
            controller.kill()
    left = await wait_nothing_left(sshd.pid, timeout=15.0)

    def orphaned() -> list[psutil.Process]:
        return [p for p in steady_processes() if p.ppid() == 1]

    # The watcher gives TERM, then KILL 5 s later: both within the wait.
    try:
        await async_wait_until(lambda: not orphaned(), 15.0, what=lambda: describe(orphaned()))
    finally:
        orphans = orphaned()
        kill(left + orphans)
    assert not left and not orphans, describe(left + orphans)
