"""A TF1 program under the shim (:mod:`trainer.shim.steps`): each worker's ``local_step``
is the count of its own training steps, not how far the global step moved, and one step in
N is traced into a ``step_anatomy`` from TensorFlow's step statistics. A real 1 ps + 2
worker cluster on loopback, the program as users write it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.warm_pool import Pool
from tests.trainer.cluster_runner import LocalCluster, shim_pool
from trainer import anatomy, protocol

pytestmark = pytest.mark.integration
__all__ = ["shim_pool"]  # the fixture, used by name: the cluster forks from it

PROGRAM = Path(__file__).resolve().parent / "data" / "own_steps.py"
START = 120.0  # three TensorFlow processes on a loaded 2-core machine
#: Enough that the chief cannot finish before the other worker has its session (the
#: program has no device filters: a late non-chief would wait for the gone chief forever).
STEPS = 3000


def outputs(cluster: LocalCluster) -> str:
    return "\n".join(f"--- {t.name} (exit {t.proc.returncode})\n{t.output[-3000:]}"
                     for t in cluster.tasks)


def test_own_steps_and_anatomy_of_a_tf1_program(shim_pool: Pool) -> None:
    args = ["--job_name={job}", "--task_index={index}", "--ps_hosts={ps_hosts}",
            "--worker_hosts={worker_hosts}", f"--steps={STEPS}"]
    cluster = LocalCluster(1, 2, args, program=PROGRAM, pool=shim_pool)
    try:
        codes = cluster.wait(START, names=["worker0", "worker1"])
        assert codes["worker0"] == 0 and codes["worker1"] == 0, outputs(cluster)
        cluster.send("ps0", "end")
        assert cluster.wait(30, names=["ps0"])["ps0"] == 0, outputs(cluster)
    finally:
        cluster.kill()
    own_total = 0
    for index in (0, 1):
        task = cluster.task(f"worker{index}")
        match = re.search(r"^own steps (\d+)$", task.output, re.M)
        assert match, task.output
        own = int(match.group(1))
        own_total += own
        (done,) = task.of(protocol.Done)
        assert done.local_step == own, (done, own)
        steps = task.of(protocol.Step)
        assert steps, task.output
        # Each report counts this worker's steps so far: never more than it ran, never less
        # than it had reported, and (another worker training beside it) below the global step.
        counts = [s.local_step for s in steps]
        assert counts == sorted(counts) and 0 < counts[-1] <= own, (counts, own)
        samples = task.of(protocol.StepAnatomy)
        assert samples, f"no step of worker{index} was sampled: {task.output[-2000:]}"
        for sample in samples:
            assert (sample.role, sample.index) == ("worker", index)
            assert sample.every >= anatomy.MIN_EVERY and 0 < sample.local_step <= own
            assert sum(p.share for p in sample.parts) == pytest.approx(1.0, abs=0.01)
            assert sample.seconds_of("compute") > 0, sample
            # The variables live on ps0: each step reads them from there.
            (read,) = [p for p in sample.parts if p.part == "read"]
            assert read.ps == 0 and read.seconds > 0, sample
            assert not [p for p in sample.parts if p.part == "wait"], "async has no waiting"
    # The global step counts both workers' steps: neither worker's count is the global one.
    final = max(d.global_step for t in cluster.tasks for d in t.of(protocol.Done))
    assert final >= STEPS and own_total >= STEPS
    assert all(t.of(protocol.Done)[0].local_step < final
               for t in cluster.tasks if t.name != "ps0"), outputs(cluster)
