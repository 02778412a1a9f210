"""Launch tasks as job steps of a Slurm allocation. Implements :class:`tui.launch.base.Launcher`
for ``kind: slurm`` hosts entries.

:meth:`SlurmLauncher.connect_all` asks for each entry's allocation
(:class:`~tui.launch.slurm.alloc.Allocation`), places the entry's tasks on its nodes
(:func:`~tui.launch.slurm.steps.place`) and probes each node's cores and GPUs through a job
step. Each task is then its own step (:func:`~tui.launch.slurm.steps.srun_argv`), its srun a
child of the controller whose pipes carry the task's stdin, stdout and stderr, so a task looks
like any local one to the supervisor. The allocation is released by :meth:`close`; if the
controller dies instead, the kernel kills each srun (which ends its step) and closes the
allocation holder's stdin (which ends the job).

Like the local kind, a Slurm entry runs the controller's interpreter (or its ``python:``) in
the controller's folder: the nodes are assumed to share this machine's file system, as
cluster nodes and their login node usually do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from tui.config.cluster import ClusterConfig, HostSpec, TaskSpec
from tui.launch.base import ConnectReport, HostInfo, LaunchError, PortProblem, PortReservation
from tui.launch.deathsig import DIE_WITH_PARENT
from tui.launch.leftover_search import DEFAULT_STOP_GRACE, LeftoverTask, StoppedLeftover
from tui.launch.lines import MAX_LINE_BYTES, OutputBatch
from tui.launch.probe import HostResources
from tui.launch.slurm import steps as slurm_steps
from tui.launch.slurm.alloc import Allocation, Node, SlurmError, run_slurm, slurm_message
from tui.launch.streams import read_first_line, task_output

log = logging.getLogger(__name__)

#: How long a step may take to start and print its pid (scheduling a step is quick).
STEP_START_TIMEOUT = 60.0
#: The job name prefix: ``squeue -n`` finds what the controller asked for.
JOB_PREFIX = "tfdist"


class SlurmTask:
    """A task running as a job step. Implements :class:`tui.launch.base.RunningTask`."""

    def __init__(self, process: asyncio.subprocess.Process, job_id: str, step: str, pid: int,
                 head: bytes, max_line: int = MAX_LINE_BYTES) -> None:
        self._process = process
        self.job_id = job_id
        self.step = step
        self._pid = pid
        self._head = head
        self._max_line = max_line

    @property
    def pid(self) -> int:
        """The task's pid on its node (also its process group id there)."""
        return self._pid

    async def output(self) -> AsyncGenerator[OutputBatch, None]:
        process = self._process
        assert process.stdout is not None and process.stderr is not None
        async for batch in task_output(process.stdout, process.stderr, self._max_line, self._head):
            yield batch

    async def wait(self) -> int:
        return slurm_steps.exit_code(await self._process.wait())

    async def send(self, line: str) -> None:
        stdin = self._process.stdin
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError(f"stdin of step {self.job_id}.{self.step} is closed")
        stdin.write(line.encode() + b"\n")
        await stdin.drain()

    async def terminate(self) -> None:
        """Close stdin and SIGTERM the step's processes (the step itself lives on until they
        exit, so the task may end gracefully)."""
        self._close_stdin()
        await self._signal("TERM")

    async def kill(self) -> None:
        """SIGKILL the step's processes; if Slurm cannot be asked, kill srun (which ends the
        step)."""
        self._close_stdin()
        if not await self._signal("KILL"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)

    def _close_stdin(self) -> None:
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                stdin.close()

    async def _signal(self, name: str) -> bool:
        if self._process.returncode is not None:
            return True
        status, _, err = await run_slurm(["scancel", f"--signal={name}", f"{self.job_id}.{self.step}"])
        if status != 0 and self._process.returncode is None:
            log.warning("scancel --signal=%s %s.%s: %s", name, self.job_id, self.step, slurm_message(err))
        return status == 0


class _NoReservation:
    """A port found free on every node; Slurm steps cannot hold it for the task, so there is
    nothing to release (the gap until the task binds it is a step's start, well under 1 s)."""

    def __init__(self, port: int) -> None:
        self._port = port

    @property
    def port(self) -> int:
        return self._port

    def release(self) -> None:
        return None


class SlurmLauncher:
    """Starts tasks as steps of one allocation per ``kind: slurm`` hosts entry. ``config``:
    the run's config (which tasks each entry has, to place them); ``notify``: called with a
    sentence while an allocation pends."""

    def __init__(self, config: ClusterConfig | None = None,
                 notify: Callable[[str], None] | None = None, max_line: int = MAX_LINE_BYTES) -> None:
        self._config = config
        self.notify = notify
        self._max_line = max_line
        self._allocations: dict[str, Allocation] = {}
        self._placement: dict[str, HostSpec] = {}
        self._lock = asyncio.Lock()

    # -- allocations --------------------------------------------------------------------

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Get every entry's allocation (at once), place its tasks, probe its nodes. Kept for
        the launcher's life: a relaunch runs in the same allocations."""
        specs = list({spec.name: spec for spec in hosts}.values())
        async with self._lock:
            results = await asyncio.gather(*(self._prepare(spec) for spec in specs), return_exceptions=True)
        ready: list[HostInfo] = []
        failures: list[LaunchError] = []
        notes: list[str] = []
        for spec, result in zip(specs, results, strict=True):
            if isinstance(result, LaunchError):
                failures.append(result)
            elif isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                failures.append(SlurmError(spec, repr(result)))
            else:
                info, note = result
                ready.append(info)
                notes += [note] if note else []
        return ConnectReport(tuple(ready), tuple(failures), tuple(notes), dict(self._placement))

    async def _prepare(self, spec: HostSpec) -> tuple[HostInfo, str]:
        allocation = self._allocations.get(spec.name)
        if allocation is None:
            allocation = await Allocation.request(self._with_tasks_per_node(spec),
                                                  f"{JOB_PREFIX}-{spec.name}", self.notify)
            self._allocations[spec.name] = allocation
        python = spec.python or sys.executable
        resources = await asyncio.gather(*(self._probe(allocation, node, python)
                                           for node in allocation.nodes))
        placed = slurm_steps.place(self._config, spec.name, allocation.nodes) if self._config else {}
        if self._config and (unknown := slurm_steps.unknown_nodes(self._config, spec.name, allocation.nodes)):
            raise SlurmError(spec, f"job {allocation.job_id} has no such node ({', '.join(unknown)}); "
                                   f"it has {', '.join(n.name for n in allocation.nodes)}. Ask for "
                                   f"them in extra: (--nodelist=...)")
        assert spec.slurm is not None
        for task, node in placed.items():
            place = replace(spec.slurm, job_id=allocation.job_id, node=node.name)
            self._placement[task] = replace(spec, address=node.address, slurm=place)
        tasks = self._config.tasks if self._config else ()
        where = slurm_steps.describe(allocation.job_id, placed, tasks)
        note = (f"host {spec.name}: waited {allocation.waited:.0f} s for Slurm job {allocation.job_id}"
                if allocation.waited >= 1 else "")
        # The smallest node stands for all: the entry's tasks share one budget of cores.
        smallest = min(resources, key=lambda r: r.cores)
        info = HostInfo(name=spec.name, python=python, python_version=sys.version.split()[0],
                        tf_version="not checked (the controller's own)", workdir=os.getcwd(),
                        home=os.path.expanduser("~"), trainer_path=f"the controller's folder; {where}",
                        uploaded=False, configured_workdir="", resources=smallest)
        return info, note

    def _with_tasks_per_node(self, spec: HostSpec) -> HostSpec:
        """``spec`` asking for a CPU per task on its busiest node (``--ntasks-per-node``)
        unless extra: says how many CPUs to take."""
        assert spec.slurm is not None
        if self._config is None or any(o.startswith(("--ntasks", "--cpus", "-n", "-c", "--exclusive"))
                                       for o in spec.slurm.extra):
            return spec
        count = slurm_steps.tasks_per_node(self._config, spec.name, spec.slurm.nodes)
        extra = (*spec.slurm.extra, f"--ntasks-per-node={count}")
        return replace(spec, slurm=replace(spec.slurm, extra=extra))

    async def _probe(self, allocation: Allocation, node: Node, python: str) -> HostResources:
        answer = await self._step_answer(allocation, node, slurm_steps.snippet_argv(python, "resources", []))
        try:
            return HostResources.from_probe(answer)
        except ValueError as exc:
            raise SlurmError(allocation.host, f"resource probe on {node.name}: {exc}") from None

    async def _step_answer(self, allocation: Allocation, node: Node, argv: Sequence[str]) -> object:
        line = slurm_steps.srun_argv(allocation.job_id, node.name, argv, name=f"{JOB_PREFIX}-probe",
                                     announce=False)
        status, out, err = await run_slurm(line, STEP_START_TIMEOUT)
        answer = slurm_steps.parse_snippet(out)
        if answer is None:
            raise SlurmError(allocation.host, f"a job step on {node.name} failed (exit status {status}): "
                                              f"{slurm_message(err)}")
        return answer

    def _allocation(self, host: HostSpec) -> Allocation:
        allocation = self._allocations.get(host.name)
        if allocation is None:
            raise SlurmError(host, "no allocation: the host was not prepared (connect_all)")
        return allocation

    def _nodes(self, host: HostSpec) -> tuple[Node, ...]:
        """The node a placed task's host names, else every node of the entry's allocation."""
        allocation = self._allocation(host)
        if host.slurm is not None and host.slurm.node is not None:
            return tuple(n for n in allocation.nodes if n.name == host.slurm.node) or allocation.nodes
        return allocation.nodes

    # -- the Launcher protocol ----------------------------------------------------------

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> SlurmTask:
        allocation = self._allocation(host)
        node = self._nodes(host)[0]
        line = slurm_steps.srun_argv(allocation.job_id, node.name, argv, name=f"{JOB_PREFIX}-{task.name}",
                                     cwd=cwd)
        try:
            process = await asyncio.create_subprocess_exec(
                *line, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env={**os.environ, **env}, cwd=cwd,
                # Own process group (a terminal's Ctrl-C reaches the controller only), and
                # SIGKILLed with the controller: a dead srun ends its step.
                start_new_session=True, preexec_fn=DIE_WITH_PARENT)
        except OSError as exc:
            raise SlurmError(host, f"cannot run srun for {task.name}: {exc.strerror or exc}") from None
        assert process.stdout is not None and process.stderr is not None
        try:
            first, head = await asyncio.wait_for(read_first_line(process.stdout), STEP_START_TIMEOUT)
        except asyncio.TimeoutError:
            first, head = None, b""
        except BaseException:
            process.kill()
            raise
        started = slurm_steps.parse_step_line(first.decode(errors="replace")) if first is not None else None
        if started is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            err = await process.stderr.read()
            await process.wait()
            raise SlurmError(host, f"{task.name} did not start as a step of job {allocation.job_id} on "
                                   f"{node.name}: {slurm_message(err.decode(errors='replace'))}")
        pid, step = started
        log.info("job %s: started %s as step %s on %s (pid %d)", allocation.job_id, task.name, step,
                 node.name, pid)
        return SlurmTask(process, allocation.job_id, step, pid, head, self._max_line)

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        if not ports:
            return []
        allocation = self._allocation(host)
        python = host.python or sys.executable
        answers = await asyncio.gather(*(self._step_answer(
            allocation, node, slurm_steps.snippet_argv(python, "ports", ["check", *map(str, ports)]))
            for node in self._nodes(host)))
        return [PortProblem(f"{host.name}/{node.name}", int(item["port"]), str(item["reason"]))
                for node, answer in zip(self._nodes(host), answers, strict=True)
                if isinstance(answer, list) for item in answer if isinstance(item, Mapping)]

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        """``n`` ports free on every node of the entry (picked on the first, checked on the rest)."""
        if n <= 0:
            return []
        allocation = self._allocation(host)
        python = host.python or sys.executable
        nodes = self._nodes(host)
        for _ in range(5):
            answer = await self._step_answer(allocation, nodes[0], slurm_steps.snippet_argv(
                python, "ports", ["hold", str(n), *map(str, sorted(avoid))]))
            ports = answer.get("ports") if isinstance(answer, Mapping) else None
            if not isinstance(ports, list):
                raise SlurmError(host, f"no free ports on {nodes[0].name}: {answer}")
            taken = {p.port for p in await self.check_ports(host, ports)} if len(nodes) > 1 else set()
            if not taken:
                return [_NoReservation(int(p)) for p in ports]
            avoid = avoid | taken
        raise SlurmError(host, f"could not find {n} ports free on every node")

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str:
        """Run a short command on the host's node as a step; its stdout."""
        allocation = self._allocation(host)
        node = self._nodes(host)[0]
        status, out, err = await run_slurm(slurm_steps.srun_argv(
            allocation.job_id, node.name, argv, name=f"{JOB_PREFIX}-command", announce=False))
        if status != 0:
            raise SlurmError(host, f"{argv[0]} on {node.name} failed (exit status {status}): "
                                   f"{slurm_message(err)}")
        return out

    async def find_leftovers(self, host: HostSpec,
                             exclude_run_ids: Iterable[str] = ()) -> list[LeftoverTask]:
        """None to find: a step ends with its srun, and a job with the controller that held it."""
        return []

    async def stop_leftovers(self, host: HostSpec, tasks: Sequence[LeftoverTask],
                             grace: float = DEFAULT_STOP_GRACE) -> list[StoppedLeftover]:
        return []

    async def close(self) -> None:
        """Release every allocation this launcher asked for (which ends its steps)."""
        allocations = list(self._allocations.values())
        self._allocations.clear()
        self._placement.clear()
        await asyncio.gather(*(a.release() for a in allocations), return_exceptions=True)
