"""Job steps in a Slurm allocation: the ``srun`` line of a task or a short command, where each
task of a hosts entry goes among the allocation's nodes, and the probes run as steps.

Established against Slurm 22.05 (see docs/slurm.md):

* ``srun --jobid=J --nodelist=N --nodes=1 --ntasks=1 --overlap --unbuffered --quiet`` starts one
  task on node N of job J beside the other steps (``--overlap``: steps share the job's CPUs
  instead of queueing for them); stdout and stderr stream through srun line by line, srun's
  stdin reaches the task (EOF included), and srun exits with the task's exit status (128+N
  when signal N killed it).
* The task is its own process group leader under slurmstepd; it prints its pid and step id
  first (``sh -c 'echo ...; exec "$@"'``), so it can be signalled and its CPU time read.
* ``scancel --signal=TERM J.S`` signals the step's processes and nothing more: the task may
  exit gracefully. A SIGTERMed or SIGKILLed srun ends its step at once (the task is SIGKILLed),
  which is what ties the steps to a controller that dies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tui.config.cluster import ClusterConfig, Job, TaskSpec
from tui.launch import snippets
from tui.launch.slurm.alloc import Node

PID_MARK = "tfdist-step"
#: The task's first line: its pid (its process group too) and its step id.
_WRAPPER = f'echo "{PID_MARK} $$ $SLURM_STEP_ID"; exec "$@"'


def srun_argv(job_id: str, node: str, argv: Sequence[str], *, name: str, cwd: str | None = None,
              announce: bool = True) -> list[str]:
    """The srun line that runs ``argv`` as one task on ``node`` of job ``job_id``.
    ``announce``: wrap it so that it first prints ``tfdist-step PID STEP``."""
    line = ["srun", f"--jobid={job_id}", f"--nodelist={node}", "--nodes=1", "--ntasks=1", "--overlap",
            "--unbuffered", "--quiet", f"--job-name={name}", "--kill-on-bad-exit=0"]
    if cwd:
        line.append(f"--chdir={cwd}")
    if announce:
        return [*line, "sh", "-c", _WRAPPER, "sh", *argv]
    return [*line, *argv]


def parse_step_line(line: str) -> tuple[int, str] | None:
    """(pid, step id) from a task's first line, or None if it is not that line."""
    words = line.split()
    if len(words) == 3 and words[0] == PID_MARK and words[1].isdigit():
        return int(words[1]), words[2]
    return None


def exit_code(srun_status: int) -> int:
    """A task's exit code from its srun's: srun reports signal N as 128+N; give it as -N, as
    for every other launcher."""
    return -(srun_status - 128) if 128 < srun_status < 128 + 65 else srun_status


def snippet_argv(python: str, name: str, args: Sequence[str]) -> list[str]:
    """``python -c SOURCE ARGS`` for one of :mod:`tui.launch.snippets`."""
    return [python, "-c", snippets.source(name), *args]


def parse_snippet(stdout: str) -> object:
    """A snippet's answer (None when it printed none)."""
    return snippets.parse_result(stdout)


def place(config: ClusterConfig, entry: str, nodes: Sequence[Node]) -> dict[str, Node]:
    """The node of each task of hosts entry ``entry``, by task name: a task that names its
    node (``node:``) there; the ps on their own nodes where there are enough (the first
    ones), the other tasks spread over the rest in turn; with one node, everything on it. A
    named node that is not in ``nodes`` is left out (see :func:`unknown_nodes`)."""
    tasks = [t for t in config.tasks if t.host == entry]
    by_name = {n.name: n for n in nodes}
    named = {t.name: by_name[t.node] for t in tasks if t.node is not None and t.node in by_name}
    tasks = [t for t in tasks if t.node is None]
    if len(nodes) <= 1:
        return {**{t.name: nodes[0] for t in tasks}, **named} if nodes else {}
    ps = [t for t in tasks if t.job is Job.PS]
    others = [t for t in tasks if t.job is not Job.PS]
    ps_nodes = list(nodes[:max(1, min(len(ps), len(nodes) - 1))]) if ps and others else list(nodes)
    rest = [n for n in nodes if n not in ps_nodes] or list(nodes)
    placed = {t.name: ps_nodes[i % len(ps_nodes)] for i, t in enumerate(ps)}
    placed.update({t.name: rest[i % len(rest)] for i, t in enumerate(others)})
    return {**placed, **named}


def tasks_per_node(config: ClusterConfig, entry: str, nodes: int) -> int:
    """How many tasks of ``entry`` the busiest node will run (at least one CPU each)."""
    count = sum(1 for t in config.tasks if t.host == entry)
    return max(1, -(-count // max(1, nodes)))


def describe(job_id: str, placement: Mapping[str, Node], tasks: Sequence[TaskSpec]) -> str:
    """``Slurm job 12: ps0 on node1, worker0 on node2`` for the run's notices."""
    return f"Slurm job {job_id}: " + ", ".join(f"{t.name} on {placement[t.name].name}"
                                               for t in tasks if t.name in placement)


def unknown_nodes(config: ClusterConfig, entry: str, nodes: Sequence[Node]) -> list[str]:
    """``task: node`` for each task of ``entry`` naming a node the allocation does not have."""
    names = {n.name for n in nodes}
    return [f"{t.name}: {t.node}" for t in config.tasks
            if t.host == entry and t.node is not None and t.node not in names]
