"""Many hosts, as a user with a lightweight program of their own (``shim: false``) sees them on
a lab of real hosts (tests/support/netlab.py): each host's preparation shown as it goes
(``hosts`` records of ``--json``), bounded by ``network.hosts_at_once``; a dead host named
with its reason while the others get ready; no TensorFlow looked for where the program may
not use it; a ps that only binds its port seen ready over SSH."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launch.test_lab_runs import assert_hosts_empty
from tests.support.netlab import NetLab
from tests.support.netlab_fixture import MakeLab

pytestmark = [pytest.mark.netlab, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
PORT = 2222
#: Binds its port (so only the port says it is up), prints steps; a worker then exits 0, a
#: ps serves until it is stopped. Importing TensorFlow leaves a file in $IMPORTED.
PROGRAM = """\
import socket, sys, time
host, _, port = sys.argv[1].rpartition(":")
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, int(port)))
server.listen()
for step in range(1, 21):
    print(f"step {step} loss {1 / step:.4f}", flush=True)
    time.sleep(0.05)
while sys.argv[2] == "ps":
    time.sleep(1)
"""
STUB_TF = "import os, uuid\nopen(os.path.join(os.environ['IMPORTED'], uuid.uuid4().hex), 'w').close()\n"


def program_folder(lab: NetLab, tmp_path: Path, names: list[str], *, at_once: int) -> Path:
    """A user's folder: the program and a hosts.yaml running 1 ps and the rest workers on
    ``names`` (each alone on its host), with a stub ``tensorflow`` on every host's path
    that records any import of it."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "task.py").write_text(PROGRAM)
    stub = tmp_path / "stub" / "tensorflow"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(STUB_TF)
    imported = tmp_path / "imported"
    imported.mkdir()
    env = {"PYTHONPATH": str(stub.parent), "IMPORTED": str(imported)}
    (folder / "hosts.yaml").write_text(yaml.safe_dump({
        "hosts": {name: lab.yaml_entry(name, workdir=tmp_path / "work" / name, env=env) for name in names},
        "cluster": {"ps": [f"{names[0]}:{PORT}"], "worker": [f"{n}:{PORT}" for n in names[1:]]},
        "program": {"command": "python task.py {address} {job}", "shim": False, "upload": ".",
                    "metrics": [r"step (?P<step>\d+) loss (?P<loss>[0-9.]+)"]},
        "training": {"steps": 20},
        "network": {"hosts_at_once": at_once},
        "run_dir": str(tmp_path / "runs"),
    }))
    return folder


def run_json(folder: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    # (--timeout: a run that does not end fails with its output, not the subprocess's timeout)
    result = subprocess.run([sys.executable, "-m", "tui", str(folder / "hosts.yaml"), "--no-ui", "--json",
                             "--timeout", "180", *args], cwd=REPO, capture_output=True, text=True,
                            timeout=240, stdin=subprocess.DEVNULL)
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result.returncode, records, result.stdout[-3000:] + result.stderr[-3000:]


def states(record: dict[str, Any]) -> dict[str, str]:
    return {row["name"]: row["state"] for row in record["hosts"]}


def test_hosts_shown_as_they_are_prepared_and_a_port_only_ps_is_ready_over_ssh(netlab: MakeLab,
                                                                              tmp_path: Path) -> None:
    lab = netlab(4)
    names = list(lab.hosts)
    folder = program_folder(lab, tmp_path, names, at_once=2)
    code, records, output = run_json(folder)
    assert code == 0, output
    hosts = [r for r in records if r["type"] == "hosts"]
    # Shown before any host was contacted, then as each went on, all before the run began.
    assert hosts and set(states(hosts[0]).values()) == {"waiting"}, hosts[:1]
    assert states(hosts[-1]) == dict.fromkeys(names, "ready"), hosts[-1]
    started = next(i for i, r in enumerate(records) if r["type"] == "run_started")
    assert records.index(hosts[-1]) < started
    # Never more than two hosts past waiting and not yet settled at once (hosts_at_once: 2).
    busy = [sum(s in ("connecting", "preparing") for s in states(r).values()) for r in hosts]
    assert max(busy) <= 2, busy
    # The ps said nothing but bound its port: seen ready, the run went on and succeeded.
    ps_states = [r["new"] for r in records if r["type"] == "task_state" and r["task"] == "ps0"]
    assert "running" in ps_states, ps_states
    # A program run without the shim: nothing imported TensorFlow on any host, nor looked it up.
    assert list((tmp_path / "imported").iterdir()) == []
    notices = [r["text"] for r in records if r["type"] == "notice"]
    assert not any("TensorFlow" in text for text in notices if text.startswith("host ")), notices
    assert_hosts_empty(lab)


def test_a_dead_host_is_named_with_its_reason_while_the_others_get_ready(netlab: MakeLab,
                                                                        tmp_path: Path) -> None:
    lab = netlab(3)
    names = list(lab.hosts)
    lab.cut(names[1])  # a worker's host: its connection attempt hangs until its timeout
    folder = program_folder(lab, tmp_path, names, at_once=2)
    # Long enough for the others to be prepared first however loaded this machine is.
    code, records, output = run_json(folder, "--connect-timeout", "60")
    assert code == 2, output
    hosts = [r for r in records if r["type"] == "hosts"]
    dead = names[1]
    others = [n for n in names if n != dead]
    # The other hosts were ready while the dead one was still being tried.
    assert any(all(states(r)[n] == "ready" for n in others) and states(r)[dead] != "failed"
               for r in hosts), [(r["t"], states(r)) for r in hosts]
    last = hosts[-1]
    assert states(last)[dead] == "failed", last
    row = next(r for r in last["hosts"] if r["name"] == dead)
    # A cut link hangs the connection until its timeout, or, once the kernel's neighbour entry
    # for the host has expired, fails it at once (EHOSTUNREACH): either is "unreachable".
    assert row["detail"].startswith(("unreachable: no SSH answer within 60 s",
                                     "unreachable: Connect call failed")), row
    assert f"1 failed ({dead}: unreachable" in line_of(last), line_of(last)
    lab.restore(dead)
    assert_hosts_empty(lab)


def line_of(record: dict[str, Any]) -> str:
    """The progress line both front ends show for a ``hosts`` record."""
    from tui.core.events import HostRow, HostsProgress
    from tui.core.host_state import HostState

    return HostsProgress(hosts=tuple(HostRow(r["name"], r["address"], HostState(r["state"]), r["detail"],
                                             tuple(r["tasks"])) for r in record["hosts"])).line


def test_a_failed_workers_host_is_left_out_with_start_without_and_a_ps_host_never(netlab: MakeLab,
                                                                                  tmp_path: Path) -> None:
    """``network.on_host_failure: start_without``: a dead host holding a worker other than the
    chief, and the run starts without it, says so and succeeds; a dead ps host fails the run
    before anything starts, saying why it cannot start without it."""
    lab = netlab(3)
    names = list(lab.hosts)  # ps0, worker0 (the chief), worker1
    folder = program_folder(lab, tmp_path, names, at_once=3)
    config = yaml.safe_load((folder / "hosts.yaml").read_text())
    config["network"]["on_host_failure"] = "start_without"
    (folder / "hosts.yaml").write_text(yaml.safe_dump(config))

    def run_without(dead: str) -> tuple[int, list[dict[str, Any]], str]:
        lab.cut(dead)
        try:
            return run_json(folder, "--connect-timeout", "10")
        finally:
            lab.restore(dead)

    code, records, output = run_without(names[0])
    assert code == 2, output
    assert not any(r["type"] == "run_started" for r in records), output
    assert "the run cannot start without ps0 (only workers other than the chief can be left out)" in output

    code, records, output = run_without(names[2])
    assert code == 0, output
    (started,) = [r for r in records if r["type"] == "run_started"]
    assert [t["name"] for t in started["tasks"]] == ["ps0", "worker0"]
    notices = [r["text"] for r in records if r["type"] == "notice"]
    assert any(text.startswith("started without worker1: host " + names[2]) for text in notices), notices
    assert states([r for r in records if r["type"] == "hosts"][-1])[names[2]] == "failed"
    assert_hosts_empty(lab)
