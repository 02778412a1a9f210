"""The training graph in this process: placement balance, initial values independent of the
partitioning, and towers. Variables live on real in-process ps servers."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from tests.trainer.cluster_runner import free_ports
from trainer import data
from trainer.cluster import Cluster
from trainer.settings import TrainingSettings


@pytest.fixture(scope="module")
def tf():
    from trainer.tfimport import import_tf

    return import_tf()


def in_process_cluster(tf, num_ps: int, cpus: int = 1) -> tuple[Cluster, object]:
    """Real gRPC servers for ``num_ps`` ps tasks and one worker, inside this process."""
    ports = free_ports(num_ps + 1)
    cluster = Cluster(tuple(f"localhost:{p}" for p in ports[:num_ps]), (f"localhost:{ports[-1]}",))
    spec = tf.train.ClusterSpec(cluster.spec())
    for i in range(num_ps):
        tf.train.Server(spec, job_name="ps", task_index=i)
    config = tf.ConfigProto()
    config.device_count["CPU"] = cpus
    worker = tf.train.Server(spec, job_name="worker", task_index=0, config=config)
    return cluster, worker


def settings(**changes) -> TrainingSettings:
    return TrainingSettings().replace(**changes)


def plan(tf, s: TrainingSettings, num_ps: int):
    from trainer.graph import build

    cluster = Cluster(tuple(f"localhost:{2000 + i}" for i in range(num_ps)), ("localhost:3000",))
    return build(tf, s, cluster, 0, data.input_shape(s)).placement


@pytest.mark.parametrize("model", ["cnn", "vgg19"])
@pytest.mark.parametrize("num_ps", [2, 3, 4, 8])
def test_greedy_with_one_partition_per_ps_is_balanced(tf, model: str, num_ps: int) -> None:
    p = plan(tf, settings(model=model, dataset="synthetic", partitions=num_ps, placement="greedy"), num_ps)
    assert p.max_mean_ratio <= 1.05, p.ps_bytes
    assert sum(p.ps_bytes) == sum(v.bytes for v in p.variables)
    assert all(v.num_shards == num_ps for v in p.variables if v.bytes > 4096)


def test_round_robin_puts_the_big_layer_on_one_ps(tf) -> None:
    """Seed 000's complaint, reproduced: TensorFlow's default placement of its CNN."""
    p = plan(tf, settings(model="cnn", dataset="synthetic", placement="round_robin"), 2)
    assert p.max_mean_ratio > 1.9
    fc1 = [v for v in p.variables if v.variable == "fc1/weights"]
    assert len(fc1) == 1 and fc1[0].bytes == 7 * 7 * 64 * 1024 * 4


def test_placement_event_round_trips(tf) -> None:
    from trainer import protocol

    p = plan(tf, settings(model="mlp", partitions=2), 2)
    again = protocol.parse_event(p.to_json())
    assert again == p


def initial_values(tf, s: TrainingSettings, num_ps: int) -> dict[str, np.ndarray]:
    """Full (unpartitioned) initial value of every global variable, assembled from its shards."""
    from trainer.graph import build

    cluster, worker = in_process_cluster(tf, num_ps)
    g = build(tf, s, cluster, 0, data.input_shape(s))
    with g.graph.as_default():
        variables = tf.global_variables()
    with tf.Session(worker.target, graph=g.graph) as sess:
        sess.run(g.init_op)
        return assemble(variables, sess.run(variables))


def assemble(variables, values) -> dict[str, np.ndarray]:
    """Whole tensors from (possibly partitioned) variables' values."""
    full: dict[str, np.ndarray] = {}
    for var, value in zip(variables, values, strict=True):
        info = var._save_slice_info
        if info is None:
            full[var.op.name] = value
            continue
        whole = full.setdefault(info.full_name, np.zeros(info.full_shape, value.dtype))
        index = tuple(slice(o, o + n) for o, n in zip(info.var_offset, value.shape, strict=True))
        whole[index] = value
    return full


def test_initial_model_does_not_depend_on_partitioning(tf) -> None:
    base = initial_values(tf, settings(model="cnn", partitions=1, placement="round_robin"), 1)
    split = initial_values(tf, settings(model="cnn", partitions=4, placement="greedy"), 4)
    assert base.keys() == split.keys()
    for name in base:
        np.testing.assert_array_equal(base[name], split[name], err_msg=name)
    # and the seed matters
    other = initial_values(tf, settings(model="cnn", seed=1), 1)
    assert not np.array_equal(other["fc1/weights"], base["fc1/weights"])


@contextlib.contextmanager
def ready_session(tf, s: TrainingSettings, num_ps: int = 1, cpus: int = 1):
    """Worker 0's graph for ``s`` on real in-process servers, initialised, its input filled:
    (the graph, a session on it)."""
    from trainer.graph import build

    cluster, worker = in_process_cluster(tf, num_ps, cpus=cpus)
    d = data.load(s)
    g = build(tf, s, cluster, 0, data.input_shape(s))
    with tf.Session(worker.target, graph=g.graph) as sess:
        sess.run(g.iterator_init, {g.x_feed: d.train.images, g.y_feed: d.train.labels})
        sess.run(g.init_op)
        sess.run(g.local_init_op)
        yield g, sess


def one_step_params(tf, s: TrainingSettings) -> dict[str, np.ndarray]:
    with ready_session(tf, s, cpus=s.gpus) as (g, sess):
        sess.run(g.train_op)
        with g.graph.as_default():
            variables = tf.trainable_variables()
        return assemble(variables, sess.run(variables))


def test_towers_average_to_the_single_tower_update(tf) -> None:
    """--gpus 4 with batch 64 (16 per tower) applies the same update as one tower of 64."""
    one = one_step_params(tf, settings(model="mlp", batch_size=64, gpus=1))
    four = one_step_params(tf, settings(model="mlp", batch_size=64, gpus=4))
    assert one.keys() == four.keys()
    for name in one:
        np.testing.assert_allclose(four[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
    initial = initial_values(tf, settings(model="mlp"), 1)
    assert not np.allclose(one["hidden/weights"], initial["hidden/weights"])


def test_towers_run_on_distinct_devices(tf) -> None:
    from trainer.graph import build

    s = settings(model="mlp", batch_size=64, gpus=2)
    cluster = Cluster(("localhost:1",), ("localhost:2",))
    g = build(tf, s, cluster, 0, data.input_shape(s))
    devices = {op.device for op in g.graph.get_operations() if op.type == "MatMul"}
    assert "/job:worker/task:0/device:CPU:0" in devices
    assert "/job:worker/task:0/device:CPU:1" in devices


@pytest.mark.parametrize(("model", "optimizer"), [("softmax", "sgd"), ("mlp", "rmsprop"), ("cnn", "adagrad"),
                                                  ("cifar_cnn", "adam"), ("vgg19", "sgd")])
def test_every_model_and_optimizer_trains_a_step(tf, model: str, optimizer: str) -> None:
    """One real step on an in-process cluster; optimizer slots sit with their variable."""
    s = settings(model=model, optimizer=optimizer, dataset="synthetic", input_size=32, batch_size=8,
                 partitions=2, learning_rate=0.01)
    before = initial_values(tf, s, 2)
    after = one_step_params(tf, s)
    moved = [name for name in after if not np.allclose(after[name], before[name])]
    assert moved, "no variable changed"
    from trainer.graph import build

    cluster = Cluster(("localhost:1", "localhost:2"), ("localhost:3",))
    g = build(tf, s, cluster, 0, data.input_shape(s))
    primaries = {v.name: v.ps for v in g.placement.variables if v.trainable}
    for v in g.placement.variables:
        owner = next((p for p in primaries if v.name.startswith(p + "/")), None)
        if owner is not None:  # a slot such as Adam's m and v
            assert v.ps == primaries[owner], v.name


def test_datasets_from_npz_files(tmp_path) -> None:
    rng = np.random.default_rng(0)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 20), x_test=rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
             y_test=rng.integers(0, 10, 5))
    loaded = data.load(settings(dataset="mnist", data_path=str(path)))
    assert loaded.train.images.shape == (20, 28, 28, 1) and loaded.test.images.shape == (5, 28, 28, 1)
    assert loaded.train.images.min() >= 0.0 and loaded.train.images.max() <= 1.0
    cifar = tmp_path / "c.npz"
    np.savez(cifar, x_train=np.zeros((4, 32, 32, 3), np.uint8), y_train=np.zeros((4, 1)),
             x_test=np.zeros((2, 32, 32, 3), np.uint8), y_test=np.zeros((2, 1)))
    assert data.load(settings(dataset="cifar10", data_path=str(cifar))).train.labels.shape == (4,)
    bad = tmp_path / "bad.npz"
    np.savez(bad, something=np.zeros(3))
    with pytest.raises(data.DatasetMissing, match="not a usable dataset file"):
        data.load(settings(dataset="mnist", data_path=str(bad)))


def test_server_config_takes_the_thread_counts_of_the_share(tf, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's share (tui.plan.allocation) reaches the server and session config."""
    from trainer.cluster import Role
    from trainer.loop import server_config

    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "3")
    monkeypatch.setenv("TF_NUM_INTEROP_THREADS", "2")
    config = server_config(tf, Role("worker", 1))
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (3, 2)
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS")
    monkeypatch.delenv("TF_NUM_INTEROP_THREADS")
    assert server_config(tf, Role("ps", 0)).intra_op_parallelism_threads == 0  # TensorFlow's default


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_only_the_chief_builds_evaluation_and_checkpoints(tf, mode: str) -> None:
    """Another worker's graph is the chief's training graph without the evaluation ops and
    the saver (both the chief's alone): the same ops, in the same order, up to them."""
    from trainer.graph import build

    s = settings(model="cnn", mode=mode)  # (cnn: its dropout draws op-seeded random numbers)
    cluster = Cluster(("localhost:1",), ("localhost:2", "localhost:3"))
    chief, other = (build(tf, s, cluster, i, data.input_shape(s)) for i in (0, 1))
    assert chief.saver is not None and chief.eval_correct is not None
    assert other.saver is None and other.eval_x is other.eval_correct is other.eval_loss_sum is None
    names = [[op.name for op in g.graph.get_operations()] for g in (chief, other)]
    assert "eval_x" in names[0] and "eval_x" not in names[1]
    assert not [n for n in names[1] if n.startswith("save/")]
    # Up to the evaluation ops the two graphs are one (so are the seeds op ids give).
    shared = names[0][:names[0].index("eval_x")]
    assert names[1][:len(shared)] == shared
    assert set(names[1]) < set(names[0])
    assert other.train_op.name == chief.train_op.name
