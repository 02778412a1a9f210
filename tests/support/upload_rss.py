"""Upload one folder over SSH in a process of its own and report its memory:
``python -m tests.support.upload_rss ADDRESS PORT IDENTITY KNOWN_HOSTS FOLDER WORKDIR``.

It prints one JSON line: the resident memory before the folder is read (``before_kib``), the
peak while it is read and uploaded (``peak_kib``) and the remote copy's path. A process of
its own, so that what pytest holds does not blur what the upload costs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tui.config.cluster import HostSpec
from tui.launch.package import upload_package
from tui.launch.ssh import deploy
from tui.launch.ssh.connect import ConnectOptions, open_connection


def status_kib(field: str) -> int:
    """``field`` (VmRSS, VmHWM) of /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


async def main(address: str, port: str, identity: str, known_hosts: str, folder: str,
               workdir: str) -> None:
    spec = HostSpec(name="far", address=address, port=int(port), user="root", identity=identity,
                    known_hosts=known_hosts, python=sys.executable, workdir=workdir)
    conn = await open_connection(spec, ConnectOptions(ssh_config=None))
    try:
        # The peak from here on: writing 5 to clear_refs resets VmHWM to the current VmRSS.
        Path("/proc/self/clear_refs").write_text("5")
        before = status_kib("VmRSS")
        done = await deploy.deploy(conn, spec, workdir, upload_package(Path(folder)))
        peak = status_kib("VmHWM")
    finally:
        conn.close()
    print(json.dumps({"before_kib": before, "peak_kib": peak, "path": done.path}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
