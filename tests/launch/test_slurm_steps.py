"""Job steps without a Slurm: where a hosts entry's tasks go among its nodes, the srun line
of a task, and what srun's exit status means."""

from __future__ import annotations

from pathlib import Path

from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.launch.slurm.alloc import Node, slurm_message
from tui.launch.slurm.steps import (
    exit_code,
    parse_step_line,
    place,
    srun_argv,
    tasks_per_node,
    unknown_nodes,
)

NODES = tuple(Node(f"n{i}", f"10.0.0.{i}") for i in range(3))


def config(ps: int, workers: int) -> ClusterConfig:
    tasks = tuple(TaskSpec(Job.PS, i, "hpc", None) for i in range(ps)) + \
        tuple(TaskSpec(Job.WORKER, i, "hpc", None) for i in range(workers))
    return ClusterConfig(path=Path("hosts.yaml"), hosts={"hpc": HostSpec("hpc", "hpc")}, tasks=tasks,
                         training=None)  # type: ignore[arg-type]  # placement reads only tasks


def test_ps_get_their_own_node_and_workers_share_the_rest() -> None:
    placed = place(config(1, 3), "hpc", NODES)
    assert {k: v.name for k, v in placed.items()} == {"ps0": "n0", "worker0": "n1", "worker1": "n2",
                                                      "worker2": "n1"}
    placed = place(config(2, 1), "hpc", NODES[:2])  # more ps than spare nodes: they share one
    assert {k: v.name for k, v in placed.items()} == {"ps0": "n0", "ps1": "n0", "worker0": "n1"}


def test_one_node_takes_everything() -> None:
    assert {v.name for v in place(config(1, 2), "hpc", NODES[:1]).values()} == {"n0"}
    assert tasks_per_node(config(1, 2), "hpc", 1) == 3 and tasks_per_node(config(1, 2), "hpc", 2) == 2


def test_a_task_is_one_overlapping_step_that_announces_itself() -> None:
    argv = srun_argv("12", "n1", ["python", "-m", "trainer"], name="tfdist-ps0", cwd="/work")
    assert argv[:9] == ["srun", "--jobid=12", "--nodelist=n1", "--nodes=1", "--ntasks=1", "--overlap",
                        "--unbuffered", "--quiet", "--job-name=tfdist-ps0"]
    # sh prints the task's pid and step id, then becomes the task.
    assert "--chdir=/work" in argv and argv[-7:-5] == ["sh", "-c"] and "$SLURM_STEP_ID" in argv[-5]
    assert argv[-4:] == ["sh", "python", "-m", "trainer"]
    assert parse_step_line("tfdist-step 4242 3") == (4242, "3")
    assert parse_step_line("Traceback (most recent call last):") is None


def test_srun_reports_a_signal_as_128_plus_it() -> None:
    assert (exit_code(0), exit_code(3), exit_code(137), exit_code(143)) == (0, 3, -9, -15)


def test_slurms_error_lines_are_kept_in_its_words() -> None:
    stderr = ("salloc: error: invalid partition specified: nosuch\n"
              "salloc: error: Job submit/allocate failed: Invalid partition name specified\n")
    assert slurm_message(stderr) == ("invalid partition specified: nosuch; "
                                     "Job submit/allocate failed: Invalid partition name specified")


def test_a_task_that_names_its_node_goes_there() -> None:
    tasks = (TaskSpec(Job.PS, 0, "hpc", None), TaskSpec(Job.WORKER, 0, "hpc", None, node="n0"),
             TaskSpec(Job.WORKER, 1, "hpc", None, node="n9"))
    named = ClusterConfig(path=Path("hosts.yaml"), hosts={"hpc": HostSpec("hpc", "hpc")}, tasks=tasks,
                          training=None)  # type: ignore[arg-type]
    placed = place(named, "hpc", NODES[:2])
    assert placed["worker0"].name == "n0" and "worker1" not in placed
    assert unknown_nodes(named, "hpc", NODES[:2]) == ["worker1: n9"]
