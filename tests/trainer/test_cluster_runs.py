"""Real ps and worker processes on loopback ports, started together as a shell would."""

from __future__ import annotations

import time

import pytest

from tests.support.warm_pool import Pool
from tests.trainer.cluster_runner import LocalCluster, trainer_pool
from trainer import protocol

pytestmark = pytest.mark.integration
__all__ = ["trainer_pool"]  # the fixture, used by name: every cluster here forks from it

#: Every process exits by itself within this long after the last step: what it tells apart is
#: a clean ending from a hang (a ps in join() forever, a SessionManager's 30 s poll); the
#: chief's final evaluation and TensorFlow's teardown take seconds on a loaded 2-core machine.
EXIT_WINDOW = 15.0


def run(num_ps: int, num_workers: int, args: list[str], pool: Pool, timeout: float = 180) -> LocalCluster:
    cluster = LocalCluster(num_ps, num_workers, args, pool=pool)
    cluster.watch_exits()
    try:
        codes = cluster.wait(timeout)
    finally:
        cluster.kill()
    assert all(code is not None for code in codes.values()), f"hung: {codes}\n{outputs(cluster)}"
    return cluster


def outputs(cluster: LocalCluster) -> str:
    return "\n".join(f"--- {t.name} (exit {t.proc.returncode})\n{t.output[-2000:]}" for t in cluster.tasks)


def assert_clean_exit(cluster: LocalCluster) -> None:
    assert {t.name: t.proc.returncode for t in cluster.tasks} == {t.name: 0 for t in cluster.tasks}, \
        outputs(cluster)
    for task in cluster.tasks:
        assert "Traceback" not in task.output, task.output
        assert task.of(protocol.Done), task.name
        assert not task.of(protocol.Error), task.name
    last_step = max(e.t for t in cluster.tasks for e in t.of(protocol.Step))
    for task in cluster.tasks:
        assert task.exited_at is not None
        assert task.exited_at - last_step <= EXIT_WINDOW, (task.name, task.exited_at - last_step)


def final_done(cluster: LocalCluster, name: str) -> protocol.Done:
    (done,) = cluster.task(name).of(protocol.Done)
    return done


def test_default_async_run(tmp_path, trainer_pool: Pool) -> None:
    """digits + mlp, 1 ps + 2 workers, async: the product's default."""
    summaries = tmp_path / "tb"
    cluster = run(1, 2, ["--summary-dir", str(summaries)], trainer_pool)
    assert_clean_exit(cluster)
    chief, other = cluster.task("worker0"), cluster.task("worker1")
    # A non-chief worker polls for the model every 50 ms, where the seeds' SessionManager
    # sleeps 30 s between checks: it steps seconds, not tens of seconds, after the chief
    # finished initialising (the bound is loose: a loaded CI machine is slow, not 30 s slow;
    # bench.controller.startup measures the real figure).
    (init,) = [e for e in chief.of(protocol.Initialized) if e.is_chief]
    first = other.of(protocol.Step)[0]
    assert first.local_step == 1
    assert first.t - init.t <= 10.0, first.t - init.t
    # Async: the workers' local steps add up to the global step.
    dones = [final_done(cluster, n) for n in ("worker0", "worker1")]
    final_global = max(d.global_step for d in dones)
    assert sum(d.local_step for d in dones) == final_global
    assert final_global >= 1000
    # Each worker's last line says the step it reached, as its done event does (it said
    # the target: "reached global step 1000" beside "done at step 1001").
    for index, done in enumerate(dones):
        said = [line for _, line in cluster.task(f"worker{index}").lines if "reached global step" in line]
        assert said == [f"worker{index}: reached global step {done.global_step} (target 1000) "
                        f"after {done.local_step} local steps"], said
    # Held-out accuracy of the default run.
    (evaluation,) = chief.of(protocol.Eval)
    assert evaluation.accuracy >= 0.90
    assert dones[0].accuracy == evaluation.accuracy
    # The placement was announced once, by the chief, and TensorBoard files were written.
    assert len(chief.of(protocol.Placement)) == 1 and not other.of(protocol.Placement)
    assert list((summaries / "worker0").glob("events.out.tfevents.*"))
    # Plain text stays plain: nothing but events and our own log lines on stdout.
    for task in cluster.tasks:
        for _, line in task.lines:
            assert protocol.parse_event(line) is not None or line.startswith("worker"), line
        assert not [line for line in task.stderr if line.strip()], task.stderr


def test_sync_run_is_in_lockstep_and_ends_cleanly(trainer_pool: Pool) -> None:
    cluster = run(1, 2, ["--mode", "sync", "--steps", "300", "--eval-every", "100"], trainer_pool)
    assert_clean_exit(cluster)
    assert [e.global_step for e in cluster.task("worker0").of(protocol.Eval)] == [100, 200, 300]
    dones = [final_done(cluster, n) for n in ("worker0", "worker1")]
    final_global = dones[0].global_step
    assert final_global == 300
    for done in dones:
        assert abs(done.local_step - final_global) <= 1
    # every global step applied exactly replicas_to_aggregate (= 2) gradients
    assert sum(d.local_step for d in dones) == 2 * final_global


def test_sync_with_a_backup_worker_ends_cleanly(trainer_pool: Pool) -> None:
    """replicas_to_aggregate < workers: the slower worker's gradients go stale and workers
    finish at different local steps; nobody waits for a token that never comes."""
    cluster = run(2, 3, ["--mode", "sync", "--replicas-to-aggregate", "2", "--steps", "200",
                         "--partitions", "2"], trainer_pool)
    assert_clean_exit(cluster)
    assert all(final_done(cluster, f"worker{i}").global_step == 200 for i in range(3))


def test_late_worker_and_different_finish_times(trainer_pool: Pool) -> None:
    """The ps waits for every worker, even one that joins after training finished; that
    worker sees the target reached and leaves at once."""
    cluster = LocalCluster(1, 2, ["--steps", "200"], only=["ps0", "worker0"], pool=trainer_pool)
    cluster.watch_exits()
    try:
        assert cluster.wait(120, ["worker0"]) == {"ps0": None, "worker0": 0}
        assert cluster.task("ps0").proc.poll() is None
        cluster.start("worker", 1)
        cluster.watch_exits()
        assert cluster.wait(120) == {"ps0": 0, "worker0": 0, "worker1": 0}, outputs(cluster)
    finally:
        cluster.kill()
    late = final_done(cluster, "worker1")
    assert late.reason == protocol.REASON_ALREADY_COMPLETE and late.local_step == 0
    assert not cluster.task("worker1").of(protocol.Step)


def test_partition_count_does_not_change_the_loss_curve(trainer_pool: Pool) -> None:
    curves = []
    for partitions in (1, 4):
        cluster = run(2, 1, ["--steps", "40", "--log-every", "1", "--partitions", str(partitions),
                             "--model", "mlp"], trainer_pool)
        assert_clean_exit(cluster)
        steps = cluster.task("worker0").of(protocol.Step)
        curve = {s.global_step: s.loss for s in steps}
        assert set(curve) == set(range(1, 41))
        curves.append(curve)
        placement = cluster.task("worker0").of(protocol.Placement)[0]
        assert placement.partitions == partitions
    for step, loss in curves[0].items():
        assert curves[1][step] == pytest.approx(loss, rel=1e-5, abs=1e-6), step


def test_fused_and_unfused_runs_train_alike_on_the_same_placement(trainer_pool: Pool) -> None:
    """1 ps + 2 async workers, fused and not: the same bytes on each ps, a held-out accuracy
    and loss of the same ballpark, and each worker's sampled step anatomies reported."""
    ends = {}
    for fuse in ("true", "false"):
        cluster = run(1, 2, ["--steps", "600", "--fuse", fuse], trainer_pool)
        assert_clean_exit(cluster)
        chief = cluster.task("worker0")
        (placement,) = chief.of(protocol.Placement)
        (evaluation,) = chief.of(protocol.Eval)
        ends[fuse] = (placement.ps_bytes, placement.variables, evaluation)
        for name in ("worker0", "worker1"):
            samples = cluster.task(name).of(protocol.StepAnatomy)
            assert samples, name
            for sample in samples:
                assert sum(p.share for p in sample.parts) == pytest.approx(1.0, abs=0.01)
                assert sample.every >= 20 and sample.global_step > 0
    (fused_bytes, fused_vars, fused_eval), (plain_bytes, plain_vars, plain_eval) = ends["true"], ends["false"]
    assert fused_bytes == plain_bytes and fused_vars == plain_vars
    assert fused_eval.accuracy >= 0.85 and plain_eval.accuracy >= 0.85
    assert fused_eval.loss is not None and plain_eval.loss is not None
    assert fused_eval.loss == pytest.approx(plain_eval.loss, rel=0.5)


def test_checkpoints_resume_and_reshard(tmp_path, trainer_pool: Pool) -> None:
    ckpt = str(tmp_path / "ckpt")
    first = run(1, 1, ["--steps", "120", "--checkpoint-dir", ckpt, "--checkpoint-every", "50"], trainer_pool)
    assert_clean_exit(first)
    saved = [c for c in first.task("worker0").of(protocol.Checkpoint) if c.action == "saved"]
    assert [c.global_step for c in saved] == [50, 100, 120]

    # Same settings, higher target: resumes at 120.
    second = run(1, 2, ["--steps", "160", "--checkpoint-dir", ckpt], trainer_pool)
    assert_clean_exit(second)
    (restored,) = second.task("worker0").of(protocol.Checkpoint)[:1]
    assert restored.action == "restored" and restored.global_step == 120
    steps = second.task("worker0").of(protocol.Step)
    assert steps[0].global_step > 120

    # Another partition count: the checkpoint is re-sharded on restore. (Async with two
    # workers: the other worker may add a step while the chief saves, so >= 160.)
    third = run(2, 1, ["--steps", "170", "--checkpoint-dir", ckpt, "--partitions", "2"], trainer_pool)
    assert_clean_exit(third)
    first_event = third.task("worker0").of(protocol.Checkpoint)[0]
    assert first_event.action == "restored" and first_event.global_step >= 160

    # Target already reached: nothing to do, everyone still exits 0.
    fourth = run(1, 1, ["--steps", "100", "--checkpoint-dir", ckpt], trainer_pool)
    assert final_done(fourth, "worker0").reason == protocol.REASON_ALREADY_COMPLETE

    # A checkpoint of another model cannot be restored: start fresh and say so.
    fifth = run(1, 1, ["--steps", "20", "--checkpoint-dir", ckpt, "--model", "softmax"], trainer_pool)
    assert_clean_exit(fifth)
    fresh = fifth.task("worker0").of(protocol.Checkpoint)[0]
    assert fresh.action == "fresh" and "cannot restore" in fresh.reason


def test_missing_dataset_fails_with_usage_error(tmp_path, trainer_pool: Pool) -> None:
    cluster = LocalCluster(1, 1, ["--dataset", "mnist", "--data-path", str(tmp_path / "none.npz")],
                           pool=trainer_pool)
    try:
        cluster.wait(120, ["worker0"])
    finally:
        cluster.kill()
    worker = cluster.task("worker0")
    assert worker.proc.returncode == 2
    (error,) = worker.of(protocol.Error)
    assert "dataset mnist not found" in error.message
    assert "Traceback" not in worker.output


def test_hold_waits_for_go_before_starting_the_server(trainer_pool: Pool) -> None:
    """--hold: a task imports, loads and builds, says ``loaded``, and starts its server only
    when told; closing stdin instead ends it."""
    cluster = LocalCluster(1, 1, ["--steps", "50", "--hold"], pool=trainer_pool)
    cluster.watch_exits()
    try:
        for task in cluster.tasks:
            deadline = time.monotonic() + 120
            while not task.of(protocol.Loaded) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert task.of(protocol.Loaded), task.output
            assert not task.of(protocol.Ready)
        for task in cluster.tasks:
            assert task.proc.stdin is not None
            task.proc.stdin.write(b"go\n")
            task.proc.stdin.flush()
        assert cluster.wait(120) == {"ps0": 0, "worker0": 0}, outputs(cluster)
    finally:
        cluster.kill()
    assert final_done(cluster, "worker0").global_step >= 50


def test_closing_stdin_ends_a_held_task(trainer_pool: Pool) -> None:
    cluster = LocalCluster(1, 1, ["--hold"], only=["ps0"], pool=trainer_pool)
    try:
        ps = cluster.task("ps0")
        deadline = time.monotonic() + 120
        while not ps.of(protocol.Loaded) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ps.proc.stdin is not None
        ps.proc.stdin.close()
        assert ps.proc.wait(timeout=10) == 143
    finally:
        cluster.kill()
