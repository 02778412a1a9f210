"""``tfdist-tui check`` (tui.plan.dryrun) on a lab of real hosts (tests/support/netlab.py):
each host's shares and placement, one host cut off, one whose python is a plain venv without
TensorFlow, one in use on its port; every problem listed, exit 2, typed JSON for CI, and
nothing left running on any host. Also a copy that would fail to upload (the real sshd) and a
Slurm host's partition (the real test Slurm)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.launch.test_lab_runs import PORT, assert_hosts_empty, standard_layout
from tests.support.clirun import REPO
from tests.support.netlab_fixture import MakeLab
from tests.support.slurm import HELD_PARTITION, PARTITION, SlurmCluster
from tests.support.slurm_helpers import our_jobs, slurm_hosts
from tests.support.ssh import SshServer, describe, remote_processes
from tui.launch.ssh.deploy import local_package

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", "check", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=240, stdin=subprocess.DEVNULL)


def test_check_lists_every_problem_of_the_lab_and_leaves_nothing_running(
        netlab: MakeLab, tmp_path: Path) -> None:
    lab = netlab(4)
    path = standard_layout(lab, tmp_path, ps=1, workers=3)
    ok = check(str(path))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "the run could start" in ok.stdout
    for name in ("h0", "h1", "h2", "h3"):
        assert f"{name:<12} ok" in ok.stdout
    # Every remote host's part of the plan: what it offers, its task's share, its ps's bytes,
    # and the trainer's copy the run would upload there.
    plan = json.loads(check(str(path), "--json").stdout)
    by_host = {h["host"]: h for h in plan["hosts"]}
    assert set(plan["shares"]) == {"ps0", "worker0", "worker1", "worker2"}
    assert by_host["h1"]["shares"] == {"worker0": plan["shares"]["worker0"]}
    assert "core" in plan["shares"]["worker0"]
    assert by_host["h0"]["ps_bytes"]["ps0"] > 0 and not by_host["h1"]["ps_bytes"]
    assert "cores" in by_host["h2"]["offers"]
    assert [(c["name"], c["state"]) for c in by_host["h3"]["copies"]] == [("trainer", "upload")]
    assert f"{'':<12} shares worker0 {plan['shares']['worker0']}" in ok.stdout
    assert f"{'':<12} holds ps0 " in ok.stdout and "(100%)" in ok.stdout
    assert f"{local_package().dirname} would be uploaded" in ok.stdout
    assert not (tmp_path / "work").exists()  # checked, never placed

    no_tf = tmp_path / "no-tf"
    subprocess.run([sys.executable, "-I", "-m", "venv", "--without-pip", str(no_tf)], check=True)
    config = yaml.safe_load(path.read_text())
    config["hosts"]["h2"]["python"] = str(no_tf / "bin" / "python")
    config["network"] = {"lease": 5, "unreachable_timeout": 60}
    path.write_text(yaml.safe_dump(config))
    lab.cut("h1")
    holder = ("import socket, sys, time; s = socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); "
              "s.listen(); print('up', flush=True); time.sleep(600)")
    taken = subprocess.Popen(["ip", "netns", "exec", lab.hosts["h3"].namespace, sys.executable, "-c", holder,
                              str(PORT)], stdout=subprocess.PIPE, text=True)
    try:
        assert taken.stdout is not None and taken.stdout.readline().strip() == "up"
        started = time.monotonic()
        bad = check(str(path), "--connect-timeout", "5")
        took = time.monotonic() - started
        as_json = check(str(path), "--connect-timeout", "5", "--json")
    finally:
        lab.restore("h1")
        taken.kill()
        taken.wait()
    output = bad.stdout + bad.stderr
    assert bad.returncode == 2, output
    assert "Traceback" not in output
    assert "h0           ok" in bad.stdout
    assert "h1           PROBLEM" in bad.stdout  # cut: it does not answer
    assert "h2           PROBLEM" in bad.stdout and "no tensorflow package is installed" in bad.stdout
    assert "cannot import tensorflow" not in bad.stdout  # asked of its metadata, never imported
    assert "h3           PROBLEM" in bad.stdout and f"{PORT}" in bad.stdout.split("h3           PROBLEM")[1]
    report = json.loads(as_json.stdout)
    assert f"{len(report['problems'])} problems: the run would not start" in bad.stdout
    # Every host asked at once: the cut host's wait is not added to the others'.
    assert took < 120, took
    assert as_json.returncode == 2 and not report["ok"]
    assert len(report["problems"]) == sum(len(h["problems"]) for h in report["hosts"])
    # Typed records, for CI to tell them apart without parsing sentences.
    assert {(p["host"], p["kind"]) for p in report["problems"]} == \
        {("h1", "connect"), ("h2", "tensorflow"), ("h3", "port")}
    assert all(isinstance(p["message"], str) and p["message"] for p in report["problems"])
    assert {h["host"]: bool(h["problems"]) for h in report["hosts"]} == \
        {"h0": False, "h1": True, "h2": True, "h3": True}
    assert report["hosts"][0]["tf_version"]  # h0's TensorFlow, read without importing it
    assert_hosts_empty(lab, 30)


@pytest.mark.parametrize("shim", [False, True])
def test_tensorflow_is_asked_of_a_host_only_where_the_program_needs_it(tmp_path: Path, shim: bool) -> None:
    """A program run without the shim may not use TensorFlow (the run never looks for it): a
    host whose Python has none is no problem of the run's; under the shim it is."""
    no_tf = tmp_path / "no-tf"
    subprocess.run([sys.executable, "-I", "-m", "venv", "--without-pip", str(no_tf)], check=True)
    (tmp_path / "train.py").write_text("print('training')\n")
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({
        "hosts": {"localhost": {"python": str(no_tf / "bin" / "python")}},
        "cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"]},
        "program": {"command": "python train.py", "shim": shim},
        "run_dir": str(tmp_path / "runs")}))
    result = check(str(path), "--json")
    report = json.loads(result.stdout)
    kinds = {p["kind"] for p in report["problems"]}
    if shim:
        assert result.returncode == 2 and kinds == {"tensorflow"}, result.stdout + result.stderr
    else:
        assert result.returncode == 0 and not kinds, result.stdout + result.stderr


def test_a_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("cluster:\n  ps: [localhost:99999]\n")
    result = check(str(path))
    assert result.returncode == 2 and result.stderr.startswith(f"error: {path}:2:")
    assert "Traceback" not in result.stderr


def test_a_port_in_use_on_this_machine_is_a_problem(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        path = tmp_path / "hosts.yaml"
        path.write_text(f"cluster: {{ps: ['localhost:{port}'], worker: [localhost:auto]}}\n"
                        f"run_dir: {tmp_path / 'runs'}\n")
        result = check(str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"localhost:{port} is in use" in result.stdout
    assert not (tmp_path / "runs").exists()  # nothing started, not even a run directory


def test_a_copy_that_could_not_be_uploaded_is_a_problem(sshd: SshServer, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    host = sshd.yaml_entry(sshd.host("far", workdir=blocker / "work"))
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": {"far": host}, "run_dir": str(tmp_path / "runs"),
                                    "cluster": {"ps": ["far:auto"], "worker": ["far:auto"]}}))
    result = check(str(path), "--json")
    assert result.returncode == 2, result.stdout + result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["host"] == "far" and problem["kind"] == "copy"
    assert f"the upload would fail: {blocker} cannot hold it" in problem["message"]
    assert not remote_processes(sshd.pid), describe(remote_processes(sshd.pid))


def test_a_slurm_hosts_partition_is_asked_of_slurm(slurm: SlurmCluster, tmp_path: Path) -> None:
    path = slurm_hosts(tmp_path / "hosts.yaml")
    there = check(str(path))
    assert there.returncode == 0, there.stdout + there.stderr
    assert f"{'hpc':<12} ok" in there.stdout

    slurm_hosts(path, entry={"partition": "nosuch"})
    missing = check(str(path), "--json")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    (problem,) = json.loads(missing.stdout)["problems"]
    assert (problem["host"], problem["kind"]) == ("hpc", "partition")
    assert problem["message"].startswith("partition nosuch is not one of this cluster's"), problem

    slurm_hosts(path, entry={"partition": HELD_PARTITION})  # there, but its State is DOWN
    down = check(str(path))
    assert down.returncode == 2, down.stdout + down.stderr
    assert f"partition {HELD_PARTITION} is down: an allocation there would wait until it is up" in down.stdout
    assert PARTITION != "nosuch" and not our_jobs(slurm)  # asked, nothing allocated


def test_ctrl_c_while_a_host_is_asked_ends_it_cleanly(tmp_path: Path) -> None:
    """A host that takes the connection and never says a word (no SSH banner): the check waits
    for it until Ctrl-C, which ends it with 130 and a sentence, not a traceback."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        path = tmp_path / "hosts.yaml"
        path.write_text(yaml.safe_dump({
            "hosts": {"far": {"address": "127.0.0.1", "port": silent.getsockname()[1]}},
            "cluster": {"ps": ["far:auto"], "worker": ["far:auto"]}, "run_dir": str(tmp_path / "runs")}))
        argv = [sys.executable, "-m", "tui", "check", str(path), "--connect-timeout", "120"]
        process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   stdin=subprocess.DEVNULL)
        try:
            silent.settimeout(120)
            connection, _ = silent.accept()  # the check is asking the host now
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
            connection.close()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, out + err
    assert "interrupted: nothing was started" in err and "Traceback" not in out + err
