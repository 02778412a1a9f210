"""Traffic per ps on real links (tests/support/netlab.py): every ps on port 2222 of its own
host, sampled over SSH every half second by one sampler per host, against what the hosts'
links carried."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.launch.test_lab_runs import REPO, assert_hosts_empty, standard_layout
from tests.support.netlab import SSH_PORT, NetLab
from tests.support.netlab_fixture import MakeLab

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: Bytes of headers the link counts per packet (one per packet it sees, however large the
#: packet: veths pass TCP segmentation-offload packets whole): Ethernet 14, IPv4 20, TCP 20
#: and its timestamp option 12. TCP's counters hold only payload.
HEADERS = 66
#: Each ps link's cap (tc tbf): with it, training lasts many sample intervals (the bytes a
#: ps moves after its last sample, when it exits, are not counted: at most 0.5 s of them).
LINK_CAP = "100mbit"
#: Greedy placement of the two-layer MLP on 2 ps: the hidden layer's weights (64 x 1024) on
#: one ps, the rest on the other, so the two carry ~6x different bytes.
TRAINING = {"steps": 300, "log_every": 50, "hidden_units": 1024, "placement": "greedy"}


class SessionBytes:
    """The controller's SSH traffic to each ps host, read while the run is on (its
    connections close at the end): what a link carries beside the ps's own."""

    def __init__(self, lab: NetLab, names: Sequence[str]) -> None:
        self.lab = lab
        self.peak: dict[str, dict[tuple[str, str], int]] = {name: {} for name in names}

    def read(self) -> None:
        for name, peak in self.peak.items():
            for connection, moved in self.lab.served_bytes(name, SSH_PORT).items():
                peak[connection] = max(peak.get(connection, 0), moved)

    def total(self, name: str) -> int:
        return sum(self.peak[name].values())


async def run_watching(hosts_yaml: Path, sessions: SessionBytes) -> tuple[int, str, str]:
    """The headless controller with ``--json``, the SSH sessions read every 0.2 s meanwhile."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui", str(hosts_yaml), "--json", cwd=REPO, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    finished = asyncio.ensure_future(process.communicate())
    try:
        while not finished.done():
            await asyncio.to_thread(sessions.read)
            await asyncio.wait({finished}, timeout=0.2)
        out, err = await asyncio.wait_for(finished, 240)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_each_ps_on_port_2222_of_its_own_host_carries_what_its_link_carries(netlab: MakeLab,
                                                                                  tmp_path: Path) -> None:
    lab = netlab(4)
    for ps_host in ("h0", "h1"):
        lab.cap(ps_host, LINK_CAP)
    hosts_yaml = standard_layout(lab, tmp_path, ps=2, workers=2, training=TRAINING)
    sessions = SessionBytes(lab, ("h0", "h1"))
    before = {name: lab.counters(name) for name in ("h0", "h1")}
    code, out, err = await run_watching(hosts_yaml, sessions)
    after = {name: lab.counters(name) for name in ("h0", "h1")}
    assert code == 0, out[-3000:] + err[-3000:]
    records = [json.loads(line) for line in out.splitlines()]

    (finished,) = [r for r in records if r["type"] == "run_finished"]
    summary = finished["traffic"]["summary"]
    assert summary is not None, finished["traffic"]
    run_dir = Path(finished["summary"]["run_dir"])
    assert json.loads((run_dir / "traffic.json").read_text()) == finished["traffic"]
    # The link also carries the controller's SSH sessions, and every packet's headers.
    moved = {name: after[name] - before[name] for name in ("h0", "h1")}
    on_link = {name: link.total - HEADERS * link.packets - sessions.total(name)
               for name, link in moved.items()}
    measured = {ps["task"]: ps["bytes_sent"] + ps["bytes_received"] for ps in summary["ps"]}
    report = (f"measured per ps {measured}, on the links {on_link} (SSH sessions "
              f"{ {name: sessions.total(name) for name in on_link} } left out)")
    print(report)  # the figures, for a run with -s
    assert abs(measured["ps0"] - on_link["h0"]) <= 0.10 * on_link["h0"], report
    assert abs(measured["ps1"] - on_link["h1"]) <= 0.10 * on_link["h1"], report
    big, small = sorted(on_link.values())[::-1]
    assert big > 3 * small, report  # the placement's imbalance, really there
    assert summary["measured_imbalance"] > 1.4, summary

    # One traffic record per sample, half a second apart (one command per sample over SSH
    # took 1.9-4 s), each ps its own figures.
    samples = [r for r in records if r["type"] == "traffic"]
    assert len(samples) >= 4, samples
    assert [ps["task"] for ps in samples[-1]["ps"]] == ["ps0", "ps1"]
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(samples)]
    assert statistics.median(gaps) < 0.8, gaps
    assert_hosts_empty(lab)
