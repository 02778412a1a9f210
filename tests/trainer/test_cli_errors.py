"""Bad settings and cluster descriptions: exit 2 with one line on stderr, no traceback, and an
``error`` event on stdout for the controller. None of these start TensorFlow."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from tests.trainer.cluster_runner import REPO
from trainer import protocol
from trainer.lifecycle import root_cause

CLUSTER = json.dumps({"cluster": {"ps": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"]},
                      "task": {"type": "worker", "index": 0}})


def run_trainer(args: list[str], tf_config: str | None = CLUSTER) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    if tf_config is not None:
        env["TF_CONFIG"] = tf_config
    return subprocess.run([sys.executable, "-m", "trainer", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "tf_config", "expected"), [
    (["--model", "resnet"], CLUSTER, "--model: expected one of softmax, mlp, cnn, cifar_cnn, vgg19"),
    (["--batch-size", "0"], CLUSTER, "--batch-size must be a positive integer, got 0"),
    (["--batch-size", "many"], CLUSTER, "--batch-size: expected an integer"),
    (["--partitions", "0"], CLUSTER, "--partitions must be a positive integer, got 0"),
    (["--mode", "sync", "--replicas-to-aggregate", "3"], CLUSTER,
     "--replicas-to-aggregate must be at most the number of workers (2), got 3"),
    (["--placement", "random"], CLUSTER, "--placement: expected one of greedy, round_robin"),
    ([], "{not json", "TF_CONFIG is not valid JSON"),
    ([], json.dumps({"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]},
                     "task": {"type": "worker", "index": 3}}),
     "task worker3 is not in the cluster (it has 1 worker task)"),
    ([], json.dumps({"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]},
                     "task": {"type": "evaluator", "index": 0}}), "must be 'ps' or 'worker'"),
    ([], json.dumps({"cluster": {"worker": ["localhost:2"]}, "task": {"type": "worker", "index": 0}}),
     "the cluster has no ps task"),
    ([], json.dumps({"cluster": {"ps": ["localhost:99999"], "worker": ["localhost:2"]},
                     "task": {"type": "worker", "index": 0}}), "bad task address 'localhost:99999'"),
    ([], None, "no cluster given"),
    (["--ps_hosts", "localhost:1", "--worker_hosts", "localhost:2", "--job_name", "chief"], None,
     "--job_name must be 'ps' or 'worker'"),
    (["--no-such-flag"], CLUSTER, "unrecognized arguments: --no-such-flag"),
])
def test_bad_settings_exit_2_with_one_line(args: list[str], tf_config: str | None, expected: str) -> None:
    result = run_trainer(args, tf_config)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    event = protocol.parse_event(result.stdout.strip().splitlines()[-1])
    assert isinstance(event, protocol.Error) and event.type == "usage"


def test_seed_flags_work_without_tf_config() -> None:
    result = run_trainer(["--ps_hosts", "localhost:1", "--worker_hosts", "localhost:2,localhost:3",
                          "--job_name", "worker", "--task_index", "5"], None)
    assert result.returncode == 2
    assert "task worker5 is not in the cluster (it has 2 worker tasks)" in result.stderr


def test_plan_does_not_need_the_dataset(tmp_path) -> None:
    result = run_trainer(["plan", "--num-ps", "1", "--dataset", "mnist", "--data-path",
                          str(tmp_path / "nope.npz")])
    # plan never loads data: it only needs the input shape
    assert result.returncode == 0, result.stderr


def test_plan_prints_the_placement_event_without_a_cluster() -> None:
    result = run_trainer(["plan", "--num-ps", "2", "--model", "cnn", "--dataset", "synthetic",
                          "--partitions", "2"], tf_config=None)
    assert result.returncode == 0, result.stderr
    events = [protocol.parse_event(line) for line in result.stdout.splitlines()]
    (placement,) = [e for e in events if isinstance(e, protocol.Placement)]
    assert placement.num_ps == 2 and placement.partitions == 2
    assert placement.max_mean_ratio <= 1.05
    assert {v.ps for v in placement.variables} == {0, 1}
    assert result.stderr.strip() == ""


def test_plan_table_uses_tf_config_cluster() -> None:
    tf_config = json.dumps({"cluster": {"ps": ["a:1", "b:1", "c:1"], "worker": ["d:1"]}})
    result = run_trainer(["plan", "--table", "--model", "cnn", "--placement", "round_robin"], tf_config)
    assert result.returncode == 0, result.stderr
    assert "fc1/weights" in result.stdout
    assert "max/mean" in result.stdout and "(round_robin, partitions 1, 3 ps)" in result.stdout
    assert "ps2" in result.stdout


#: TensorFlow 2's message for a checkpoint written to a full disk (from a real run).
FULL_DISK = """Graph execution error:

Detected at node 'save/SaveV2' defined at (most recent call last):
    File "<stdin>", line 4, in <module>
Node: 'save/SaveV2'
/tmp/disk/ckpt.data-00000-of-00001.tempstate139; No space left on device
\t [[{{node save/SaveV2}}]]
Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom.

Original stack trace for 'save/SaveV2':
  File "<stdin>", line 4, in <module>
"""


def test_a_tensorflow_error_is_reported_by_its_root_cause() -> None:
    assert root_cause(FULL_DISK) == "/tmp/disk/ckpt.data-00000-of-00001.tempstate139; No space left on device"
    assert root_cause("Connection reset\nby peer") == "Connection reset; by peer"
    assert root_cause("Graph execution error:") == "Graph execution error:"


def test_a_missing_tensorflow_shows_on_stderr(tmp_path) -> None:
    """The wrong python (one without TensorFlow): the traceback must pass the trainer's
    stderr filter before it exits, or the controller shows "its last 0 lines"."""
    package = tmp_path / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tensorflow'\")\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{REPO}",
           "TF_CONFIG": json.dumps({"cluster": {"ps": ["localhost:1"], "worker": ["localhost:2"]},
                                    "task": {"type": "ps", "index": 0}})}
    result = subprocess.run([sys.executable, "-m", "trainer", "--watch-stdin", "no"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'tensorflow'" in result.stderr


def test_two_tasks_started_at_once_on_one_port_the_loser_names_the_port(tmp_path) -> None:
    """Two controllers on the same fixed ports launch their ps at the same moment: one must
    fail at once (before importing TensorFlow), saying the port is in use, not with
    TensorFlow's "Could not start gRPC server" seconds later."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
           "TF_CONFIG": json.dumps({"cluster": {"ps": [f"localhost:{port}"], "worker": ["localhost:1"]},
                                    "task": {"type": "ps", "index": 0}})}
    start = time.monotonic()
    tasks = [subprocess.Popen([sys.executable, "-m", "trainer", "--watch-stdin", "no"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for _ in range(2)]
    try:
        loser = None
        while loser is None and time.monotonic() - start < 20:
            loser = next((t for t in tasks if t.poll() is not None), None)
            time.sleep(0.05)
        assert loser is not None, "neither task failed"
        elapsed = time.monotonic() - start
    finally:
        for task in tasks:
            task.kill()
    out, err = loser.communicate(timeout=10)
    assert loser.returncode == 1
    assert f"port {port} of localhost:{port} cannot be used: address already in use" in err
    (event,) = [protocol.parse_event(line) for line in out.splitlines()]
    assert isinstance(event, protocol.Error) and event.type == "port_in_use"
    assert elapsed < 10  # TensorFlow's import alone takes longer on a loaded machine
    winner = next(t for t in tasks if t is not loser)
    winner.communicate(timeout=10)
