"""The lab of real hosts itself (tests/support/netlab.py): hosts reach each other only through
the bridge, a cut host is unreachable and comes back, a capped link is slow, its counters
move, and teardown leaves nothing of the lab behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support import wait_until
from tests.support.netlab import LOCKS, NetLab, links, namespaces
from tests.support.netlab_fixture import MakeLab

#: A TCP connect from inside a host to another's sshd: prints "ok" or the error.
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], 22), timeout=float(sys.argv[2])).close()\n"
           "    print('ok')\n"
           "except OSError as error:\n"
           "    print(type(error).__name__)\n")


def connect(lab: NetLab, source: str, target_address: str, timeout: float = 3.0) -> str:
    return lab.run(source, sys.executable, "-c", CONNECT, target_address, str(timeout)).stdout.strip()


def ssh(lab: NetLab, name: str, *command: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    """``command`` on lab host ``name`` through its own sshd, as the controller would reach it."""
    return subprocess.run(
        ["ssh", "-i", str(lab.user_key), "-o", f"UserKnownHostsFile={lab.known_hosts}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
         f"root@{lab.hosts[name].address}", *command],
        capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def test_hosts_reach_each_other_through_the_bridge_only(netlab: MakeLab) -> None:
    lab = netlab(3)
    h0, h1, h2 = (lab.hosts[n] for n in ("h0", "h1", "h2"))
    assert len({h.address for h in (h0, h1, h2)}) == 3
    before = {name: lab.counters(name) for name in lab.hosts}
    assert connect(lab, "h0", h1.address) == "ok"
    # Each host has a network stack of its own: h1's sshd is not on h0's loopback.
    assert connect(lab, "h0", "127.0.0.1") == "ConnectionRefusedError"
    assert h0.address not in subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True,
                                            text=True, check=True).stdout
    after = {name: lab.counters(name) for name in lab.hosts}
    assert (after["h0"] - before["h0"]).from_host > 0  # h0's packets left through its own link
    assert (after["h1"] - before["h1"]).to_host > 0    # and came in through h1's

    # Over SSH, as the controller reaches a host: 2 MB out of h2 are on h2's link.
    result = ssh(lab, "h2", "head", "-c", "2000000", "/dev/zero")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) == 2_000_000
    assert (lab.counters("h2") - after["h2"]).from_host >= 2_000_000


def test_a_cut_host_is_unreachable_and_comes_back(netlab: MakeLab) -> None:
    lab = netlab(2)
    target = lab.hosts["h1"].address
    assert connect(lab, "h0", target) == "ok"
    lab.cut("h1")
    assert connect(lab, "h0", target, timeout=1.0) in ("TimeoutError", "OSError")
    lab.restore("h1")
    wait_until(lambda: connect(lab, "h0", target, timeout=1.0) == "ok", 15, "h1 back after restore")


def test_a_capped_link_is_slow_and_pids_are_per_host(netlab: MakeLab) -> None:
    lab = netlab(2)
    lab.cap("h1", rate="20mbit")
    started = time.monotonic()
    result = ssh(lab, "h1", "head", "-c", "5000000", "/dev/zero")
    elapsed = time.monotonic() - started
    assert result.returncode == 0 and len(result.stdout) == 5_000_000, result.stderr
    assert elapsed >= 1.6, f"5 MB through a 20 Mbit/s link took {elapsed:.2f} s"  # 2.0 s at the cap
    # Lifted, on both ends of the cable.
    lab.uncap("h1")
    outside = subprocess.run(["tc", "qdisc", "show", "dev", lab.hosts["h1"].veth], capture_output=True,
                             text=True)
    inside = lab.run("h1", "tc", "qdisc", "show", "dev", "eth0")
    assert "tbf" not in outside.stdout + inside.stdout, (outside.stdout, inside.stdout)
    assert ssh(lab, "h1", "true").returncode == 0
    # A process started in h0 is in h0 (and only there), and goes when it ends.
    sleeper = subprocess.Popen(["ip", "netns", "exec", lab.hosts["h0"].namespace, "sleep", "60"])
    try:
        wait_until(lambda: sleeper.pid in lab.leftovers("h0"), 10, lambda: lab.pids("h0"))
        assert sleeper.pid not in lab.pids("h1")
        assert lab.hosts["h0"].sshd_pid in lab.pids("h0")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert lab.leftovers("h0") == []


def test_two_labs_at_once_share_nothing_and_teardown_removes_exactly_its_own(tmp_path: Path,
                                                                              netlab: MakeLab) -> None:
    first, second = netlab(1), netlab(1)
    assert first.prefix != second.prefix and first.id != second.id
    first_names = {h.namespace for h in first.hosts.values()}
    second_names = {h.namespace for h in second.hosts.values()}
    assert first_names | second_names <= namespaces()
    first.close()
    assert not first_names & namespaces()
    assert not {h.veth for h in first.hosts.values()} & links()
    assert f"tf{first.id}" not in links()
    assert not (LOCKS / first.prefix).exists()
    # The other lab is untouched and still works.
    assert second_names <= namespaces()
    assert ssh(second, "h0", "true").returncode == 0
    second.close()
    assert not second_names & namespaces()
    first.close()  # twice is harmless
