"""Tests for tui.plan.allocation and the ``resources:`` section: each task's share of its host, from
probe results the tests provide (no GPU needed), the environment that gives it, and the
trainer side that applies it (trainer.threads)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainer import threads
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.config.resources import TaskOverride, ThreadsMode
from tui.config.yamlload import ConfigError
from tui.launch.probe import HostResources
from tui.launch.snippets import resources as snippet
from tui.plan.allocation import ResourceError, TaskShare, allocate, host_offers
from tui.plan.tasks import plan_run

TWO_CORES = HostResources(cpus=(0, 1))
GPU_HOST = HostResources(cpus=tuple(range(16)), gpus=("0", "1", "2", "3"))


def config(tmp_path: Path, text: str) -> ClusterConfig:
    path = tmp_path / "hosts.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def local_cluster(tmp_path: Path, workers: int = 2, resources: str = "") -> ClusterConfig:
    worker_list = ", ".join(["localhost:auto"] * workers)
    return config(tmp_path, f"cluster:\n  ps: [localhost:auto]\n  worker: [{worker_list}]\n{resources}")


GPU_CLUSTER = """\
hosts:
  gpu1: {address: 10.0.0.5}
cluster:
  ps: [gpu1:2222]
  worker:
    - {host: gpu1, port: 2223, gpus: 2}
    - {host: gpu1, port: 2224, gpus: 1}
    - {host: gpu1, port: 2225}
"""


def test_cores_divided_among_a_hosts_tasks_and_threads_in_each_tasks_env(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    shares = allocate(cluster, {"localhost": TWO_CORES}).shares
    # 2 cores, 3 tasks: one each (never zero), and nobody pinned unless asked.
    assert {n: s.cores for n, s in shares.items()} == {"ps0": 1, "worker0": 1, "worker1": 1}
    env = shares["worker0"].env()
    # A worker's pool is twice its share (it waits for the ps most of a step), a ps's is not.
    assert env["TF_NUM_INTRAOP_THREADS"] == env["OMP_NUM_THREADS"] == "2"
    assert shares["ps0"].env()["TF_NUM_INTRAOP_THREADS"] == "1"
    assert shares["ps0"].env()["TF_NUM_INTEROP_THREADS"] == "2"  # never 1: a blocking op would stall the rest
    assert "TFDIST_CPUS" not in env and "CUDA_VISIBLE_DEVICES" not in shares["worker0"].env()
    # A host with no GPU: workers' visibility is left alone, a ps is still hidden from GPUs.
    assert shares["ps0"].env()["CUDA_VISIBLE_DEVICES"] == ""

    sixteen = allocate(cluster, {"localhost": HostResources(tuple(range(16)), quota=6.5)}).shares
    # The quota caps 16 CPUs at 7 cores; the remainder goes to workers first.
    assert [sixteen[n].cores for n in ("ps0", "worker0", "worker1")] == [2, 3, 2]
    assert [sixteen[n].intra_op for n in ("ps0", "worker0", "worker1")] == [2, 6, 4]


def test_plan_puts_the_share_in_each_tasks_environment_and_the_users_env_wins(tmp_path: Path) -> None:
    cluster = config(tmp_path, "hosts:\n  localhost:\n"
                               "    env: {OMP_NUM_THREADS: '7', CUDA_VISIBLE_DEVICES: '0'}\n"
                               "cluster:\n  ps: [localhost:1]\n  worker: [localhost:2]\n")
    offers = host_offers(cluster, {})
    assert offers["localhost"] == HostResources(tuple(sorted(os.sched_getaffinity(0))),
                                                snippet.cpu_quota(), ("0",))
    allocation = allocate(cluster, offers)
    ps0, worker0 = plan_run(cluster, cluster.training, {"ps0": 1, "worker0": 2}, "r",
                            allocation=allocation)
    assert worker0.env["OMP_NUM_THREADS"] == "7"  # set by hand in hosts.yaml
    assert worker0.env["TF_NUM_INTRAOP_THREADS"] == str(worker0.share.intra_op if worker0.share else "")
    assert (ps0.env["CUDA_VISIBLE_DEVICES"], worker0.env["CUDA_VISIBLE_DEVICES"]) == ("", "0")
    assert worker0.env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert worker0.info.share.endswith("GPU 0") and "CUDA_VISIBLE_DEVICES=0 " in worker0.shell_command


def test_gpus_ps_hidden_and_workers_get_disjoint_devices(tmp_path: Path) -> None:
    cluster = config(tmp_path, GPU_CLUSTER)
    allocation = allocate(cluster, {"gpu1": GPU_HOST})
    gpus = {name: share.gpus for name, share in allocation.shares.items()}
    assert gpus == {"ps0": (), "worker0": ("0", "1"), "worker1": ("2",), "worker2": ("3",)}
    assert allocation.notes == ()
    assert allocation.shares["worker0"].describe() == "4 cores (8 threads), GPU 0,1"
    assert [allocation.shares[name].brief() for name in ("ps0", "worker0", "worker1")] == \
        ["4c", "4c/8t g0,1", "4c/8t g2"]
    # Asked-for devices sort by config order; the plan gives worker0 one tower per device.
    plans = plan_run(cluster, cluster.training, {"ps0": 2222, "worker0": 2223, "worker1": 2224,
                                                 "worker2": 2225}, "r", allocation=allocation)
    assert plans[1].argv[plans[1].argv.index("--gpus") + 1] == "2"
    assert plans[1].env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_users_program_gets_the_same_share_on_every_task(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    cluster = config(tmp_path, "program: {command: 'python train.py --job={job}'}\n"
                               "cluster:\n  ps: [h:1]\n  chief: [h:2]\n"
                               "  worker: [{host: h, port: 3, gpus: 2}]\n")
    allocation = allocate(cluster, {"h": HostResources((0, 1, 2, 3), gpus=("0", "1", "2"))})
    plans = {p.name: p for p in plan_run(cluster, cluster.training, {"ps0": 1, "chief0": 2, "worker0": 3},
                                         "r", allocation=allocation)}
    assert plans["worker0"].argv[-1] == "--job=worker"  # the user's command, not the trainer's
    # Thread pools for every task (TensorFlow and OpenMP read them in any program) ...
    assert all(p.env["TF_NUM_INTRAOP_THREADS"] == p.env["OMP_NUM_THREADS"] == str(p.share.intra_op)
               for p in plans.values() if p.share is not None)
    # ... the ps off the GPUs, the worker's two devices its own, the chief computing on the third.
    assert {n: p.env["CUDA_VISIBLE_DEVICES"] for n, p in plans.items()} == \
        {"ps0": "", "chief0": "2", "worker0": "0,1"}


def test_too_many_gpus_refused_naming_host_and_counts(tmp_path: Path) -> None:
    cluster = config(tmp_path, GPU_CLUSTER)
    with pytest.raises(ResourceError, match=r"host gpu1: tasks ask for 3 GPUs \(worker0: 2, worker1: 1\) "
                                            r"but it has 2 \(0,1\)"):
        allocate(cluster, {"gpu1": HostResources((0, 1), gpus=("0", "1"))})
    with pytest.raises(ResourceError, match=r"but it has 0$"):
        allocate(cluster, {"gpu1": HostResources((0,))})


def test_workers_without_a_request_share_gpus_when_there_are_too_few(tmp_path: Path) -> None:
    cluster = config(tmp_path, "cluster:\n  ps: [h:1]\n  worker: [h:2, h:3, h:4]\n")
    allocation = allocate(cluster, {"h": HostResources((0, 1, 2, 3), gpus=("0", "1"))})
    gpus = [allocation.shares[f"worker{k}"].gpus for k in range(3)]
    assert gpus == [("0",), ("1",), ("0",)]
    assert allocation.notes and "share its 2 GPU(s)" in allocation.notes[0]


def test_unprobed_host_keeps_defaults_but_hides_its_ps(tmp_path: Path) -> None:
    cluster = config(tmp_path, "cluster:\n  ps: [h:1]\n  worker: [h:2]\n")
    shares = allocate(cluster, {}).shares
    assert shares["worker0"].env() == {} and shares["ps0"].env() == {"CUDA_VISIBLE_DEVICES": ""}
    assert shares["worker0"].describe() == "? cores" and shares["worker0"].brief() == "?c"


def test_resources_section_overrides_per_job_and_task_and_pins(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, 3, "resources:\n  pin: true\n  memory_growth: false\n"
                                         "  ps: {cores: 1, inter_op: 3}\n  worker: {cores: 2}\n"
                                         "  worker2: {cores: 1, intra_op: 4}\n")
    assert cluster.resources.override_for("worker", "worker2") == TaskOverride(1, 4, None)
    shares = allocate(cluster, {"localhost": HostResources(tuple(range(4)))}).shares
    # Pinned, a worker's pool is its bare share: it cannot use more cores than it is pinned to.
    assert [(shares[n].cores, shares[n].intra_op, shares[n].inter_op) for n in
            ("ps0", "worker0", "worker1", "worker2")] == [(1, 1, 3), (2, 2, 2), (2, 2, 2), (1, 4, 4)]
    # Pinned in config order, wrapping around once the 4 CPUs are handed out.
    assert [shares[n].cpus for n in ("ps0", "worker0", "worker1", "worker2")] == \
        [(0,), (1, 2), (0, 3), (1,)]
    assert shares["worker0"].env()["TFDIST_CPUS"] == "1,2"
    assert not shares["worker0"].memory_growth


def test_threads_tensorflow_sets_no_pool_sizes(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, 1, "resources:\n  threads: tensorflow\n")
    assert cluster.resources.threads is ThreadsMode.TENSORFLOW
    share = allocate(cluster, {"localhost": TWO_CORES}).shares["worker0"]
    assert share == TaskShare(1, None, None, None, None) and share.env() == {}


@pytest.mark.parametrize(("text", "line", "column", "fragment"), [
    ("resources:\n  threads: many\n", 5, 12,
     "resources.threads: expected one of auto, tensorflow, got 'many'"),
    ("resources:\n  pin: 2\n", 5, 8, "resources.pin: expected true or false, got '2'"),
    ("resources:\n  worker3: {cores: 1}\n", 5, 3, "unknown key 'worker3' in resources"),
    ("resources:\n  worker: {cores: 0}\n", 5, 19, "resources.worker.cores: expected a whole number >= 1"),
    ("resources:\n  ps: {core: 1}\n", 5, 8, "did you mean 'cores'?"),
])
def test_resources_section_errors_are_located(tmp_path: Path, text: str, line: int, column: int,
                                              fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        local_cluster(tmp_path, 2, text)
    assert fragment in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)


def test_probe_reads_cuda_visible_devices_and_host_answers() -> None:
    assert snippet.gpu_ids({"CUDA_VISIBLE_DEVICES": "2, 3"}) == ["2", "3"]
    assert snippet.gpu_ids({"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == ["1"]
    assert snippet.gpu_ids({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert HostResources.from_probe({"cpus": [0, 1], "quota": 1.5, "gpus": ["0"]}) == \
        HostResources((0, 1), 1.5, ("0",))
    with pytest.raises(ValueError, match="cpus"):
        HostResources.from_probe({"cpus": "0-3", "quota": None, "gpus": []})


def test_trainer_reads_its_share_and_sets_the_pools() -> None:
    share = threads.from_env({"TF_NUM_INTRAOP_THREADS": "3", "TF_NUM_INTEROP_THREADS": "x",
                              "TFDIST_CPUS": "0"})
    assert share == threads.Threads(3, 0, frozenset({0}))

    class Proto:
        intra_op_parallelism_threads = 0
        inter_op_parallelism_threads = 0

    proto = Proto()
    threads.apply(proto, share)
    assert (proto.intra_op_parallelism_threads, proto.inter_op_parallelism_threads) == (3, 0)


def test_a_pinned_task_runs_on_its_cpus_only() -> None:
    import subprocess
    import sys

    first = min(os.sched_getaffinity(0))
    code = "import os; from trainer import threads; threads.pin(threads.from_env()); " \
           "print(sorted(os.sched_getaffinity(0)))"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TFDIST_CPUS": f"{first},99999"},
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == f"[{first}]"  # a CPU we may not use is skipped
