"""A host that accepts TCP and never speaks SSH, through the real controller: reported once,
after one connect timeout (the start-up's leftover search and the run's preparation share
it), never two in a row."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.ssh import SshServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 6.0


@pytest.mark.parametrize("banner", [False, True])
def test_a_silent_host_costs_one_timeout(sshd: SshServer, tmp_path: Path, banner: bool) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        sock.listen(8)
        port = sock.getsockname()[1]
        host = sshd.host("silent", sshd.addresses[0], workdir=tmp_path / "w", port=port)
        hosts = tmp_path / "hosts.yaml"
        hosts.write_text(yaml.safe_dump({"hosts": {"silent": sshd.yaml_entry(host)},
                                         "cluster": {"ps": ["localhost:auto"], "worker": ["silent:auto"]},
                                         "run_dir": str(tmp_path / "runs")}))
        accepted: list[socket.socket] = []
        if banner:  # says hello, then nothing: the key exchange never comes
            sock.settimeout(0.1)
        began = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "tui.cli", str(hosts), "--no-ui",
                                    "--connect-timeout", str(TIMEOUT)], cwd=REPO,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            while banner and process.poll() is None:
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                accepted.append(conn)
            out, _ = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            for conn in accepted:
                conn.close()
        took = time.monotonic() - began
    assert process.returncode == 2, out[-3000:]
    assert "host silent" in out and "unreachable" in out
    assert took < 2 * TIMEOUT, f"{took:.1f} s: more than one {TIMEOUT:g} s timeout\n{out[-2000:]}"
