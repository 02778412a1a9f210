"""``tfdist-tui check HOSTS.yaml``: a dry run. Validates the file, asks every host at once
(over the launchers' own connections and their probe snippet, in its ``metadata`` mode:
Python, the installed TensorFlow's version read without importing it, the free disk where
the run writes), checks the fixed ports with the launchers' port check, a Slurm host's
partition with ``sinfo``, and prints the plan: tasks per host, this machine's shares and the
placement preview. Every problem is listed, not only the first; exit 0 when the run could
start, 2 otherwise. Nothing is started: each probe is one short command that exits."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tui.common.exit_codes import ExitCode
from tui.common.terminal import inert
from tui.common.units import format_bytes
from tui.config.cluster import ClusterConfig, HostKind, HostSpec
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.launch import snippets
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT, LaunchError, PortProblem
from tui.launch.router import Router
from tui.plan.allocation import ResourceError, allocate_for
from tui.plan.preview import PreviewError, preview_placement

#: Less free disk than this where the run writes (logs, checkpoints) is a problem.
MIN_FREE_BYTES = 512 * 1024 * 1024
#: How long one host's probe may take once connected.
PROBE_TIMEOUT = 60.0


@dataclass(frozen=True)
class HostCheck:
    """What one host answered (empty where it could not be asked) and its problems."""

    host: str
    tasks: tuple[str, ...]
    python: str = ""
    python_version: str = ""
    tf_version: str = ""
    disk_folder: str = ""
    disk_free: int | None = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckReport:
    """The dry run's findings: each host's, the plan's, and every problem."""

    hosts: tuple[HostCheck, ...]
    shares: dict[str, str] = field(default_factory=dict)
    placement: str = ""
    plan_problems: tuple[str, ...] = ()

    @property
    def problems(self) -> tuple[str, ...]:
        return (*(f"{h.host}: {p}" for h in self.hosts for p in h.problems), *self.plan_problems)

    def to_json(self) -> str:
        return json.dumps({"ok": not self.problems, "problems": list(self.problems),
                           "hosts": [asdict(h) for h in self.hosts], "shares": self.shares,
                           "placement": self.placement}, indent=2)

    def lines(self) -> list[str]:
        out = []
        for h in self.hosts:
            found = ", ".join(part for part in (
                f"Python {h.python_version}" if h.python_version else "",
                f"TensorFlow {h.tf_version}" if h.tf_version else "",
                f"{format_bytes(h.disk_free)} free in {h.disk_folder}" if h.disk_free is not None else "",
            ) if part)
            mark = "ok" if not h.problems else "PROBLEM"
            out.append(f"{h.host:<12} {mark:<8} tasks {', '.join(h.tasks)}" + (f"; {found}" if found else ""))
            out += [f"{'':<12} - {p}" for p in h.problems]
        if self.shares:
            out.append("shares: " + "; ".join(f"{name} {share}" for name, share in self.shares.items()))
        if self.placement:
            out.append(f"placement: {self.placement}")
        out += [f"problem: {p}" for p in self.plan_problems]
        count = len(self.problems)
        out.append("the run could start" if not count else
                   f"{count} problem{'s' if count != 1 else ''}: the run would not start")
        return [inert(line) for line in out]


async def check(config: ClusterConfig, runs_root: Path, router: Router) -> CheckReport:
    """Every host at once, then the plan."""
    by_host: dict[str, list[str]] = {}
    for task in config.tasks:
        by_host.setdefault(task.host, []).append(task.name)
    hosts = await asyncio.gather(*(_host(config, name, tuple(tasks), runs_root, router)
                                   for name, tasks in by_host.items()))
    shares: dict[str, str] = {}
    plan_problems: list[str] = []
    try:
        allocation = await allocate_for(config, {})
        # Only what is known: another host's cores are probed when the run starts.
        shares = {name: share.describe() for name, share in allocation.shares.items() if share.cores}
    except ResourceError as exc:
        plan_problems.append(str(exc))
    try:
        placement = preview_placement(config, config.training)
        total = sum(placement.ps_bytes) or 1
        text = (f"{placement.strategy}, {placement.partitions} partition(s): "
                + ", ".join(f"ps{i} {size / total:.0%}" for i, size in enumerate(placement.ps_bytes))
                + f"; max/mean bytes per ps {placement.max_mean_ratio:.2f}")
    except PreviewError as exc:
        text = str(exc)
    return CheckReport(hosts=tuple(hosts), shares=shares, placement=text, plan_problems=tuple(plan_problems))


async def _host(config: ClusterConfig, name: str, tasks: tuple[str, ...], runs_root: Path,
                router: Router) -> HostCheck:
    host = config.hosts.get(name) or HostSpec(name=name, address=name)
    if host.launch_kind is HostKind.SLURM:
        return HostCheck(name, tasks, problems=tuple(await _partition(host)))
    problems: list[str] = []
    # As the run would: this machine's tasks use the controller's own Python unless told.
    python = sys.executable if host.is_local and not host.python else host.interpreter
    folder = str(runs_root) if host.is_local else host.workdir
    answer: dict[str, object] = {}
    try:
        argv = [python, "-c", snippets.source("probe"), folder, "metadata"]
        found = snippets.parse_result(await asyncio.wait_for(router.run_command(host, argv), PROBE_TIMEOUT))
        if not isinstance(found, dict):
            raise LaunchError(f"{python} did not run the probe")
        answer = found
        if answer.get("tf_error"):
            problems.append(f"TensorFlow: {answer['tf_error']} for {python} "
                            f"(Python {answer.get('python_version')}); install it there or set python:")
        free = answer.get("disk_free")
        if isinstance(free, int) and free < MIN_FREE_BYTES:
            problems.append(f"only {format_bytes(free)} free in {answer.get('disk_folder')} "
                            f"(logs and checkpoints go there)")
        problems += [str(p) for p in await _ports(config, host, python, router)]
    except (LaunchError, OSError, asyncio.TimeoutError) as exc:
        problems.append(str(exc) or f"did not answer within {PROBE_TIMEOUT:g} s")
    free = answer.get("disk_free")
    return HostCheck(name, tasks, python=str(answer.get("python") or ""),
                     python_version=str(answer.get("python_version") or ""),
                     tf_version=str(answer.get("tf_version") or ""),
                     disk_folder=str(answer.get("disk_folder") or ""),
                     disk_free=free if isinstance(free, int) else None, problems=tuple(problems))


async def _ports(config: ClusterConfig, host: HostSpec, python: str, router: Router) -> list[PortProblem]:
    """The fixed ports of the host's tasks that are taken. Locally the launcher's own check;
    on another host its port snippet, run as the probe is: the launcher's check would first
    prepare the host for tasks (deploy the trainer, import TensorFlow), which a dry run must not."""
    fixed = [t.port for t in config.tasks if t.host == host.name and t.port is not None]
    if not fixed or host.is_local:
        return await router.check_ports(host, fixed) if fixed else []
    argv = [python, "-c", snippets.source("ports"), "check", *(str(p) for p in fixed)]
    answer = snippets.parse_result(await asyncio.wait_for(router.run_command(host, argv), PROBE_TIMEOUT))
    problems = PortProblem.from_answer(host.name, answer)
    if problems is None:
        raise LaunchError("the port check gave no answer")
    return problems


async def _partition(host: HostSpec) -> list[str]:
    """The Slurm partition named, if any, exists (asked of this machine's Slurm)."""
    partition = host.slurm.partition if host.slurm is not None else None
    if partition is None:
        return []
    if shutil.which("sinfo") is None:
        return [f"partition {partition}: sinfo is not on this machine's PATH"]
    process = await asyncio.create_subprocess_exec(
        "sinfo", "-h", "-p", partition, "-o", "%P", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0 or not out.strip():
        return [f"partition {partition} is not one of this cluster's ({err.decode(errors='replace').strip()})"
                .replace(" ()", "")]
    return []


def check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui check",
        description="Check, before anything starts, that a run of HOSTS.yaml could start: every "
                    "host answers, has Python and TensorFlow (its version read without importing "
                    "it), free disk and free ports; a Slurm host's partition exists. Prints the "
                    "plan; exits 0 when the run could start, 2 with every problem listed.")
    parser.add_argument("hosts", metavar="HOSTS.yaml", type=Path)
    parser.add_argument("--json", action="store_true", help="print the findings as one JSON document")
    parser.add_argument("--run-dir", type=Path, metavar="DIR", help="where run directories would go")
    parser.add_argument("--accept-new-host-keys", action="store_true",
                        help="record the SSH host key of a host not yet in known_hosts")
    parser.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for each SSH host (default {DEFAULT_CONNECT_TIMEOUT:g})")
    return parser


def check_main(argv: Sequence[str]) -> int:
    """``tfdist-tui check``; returns the exit code."""
    try:
        args = check_parser().parse_args(list(argv))
        config = load_config(args.hosts)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    except ConfigError as exc:
        print(inert(f"error: {exc}", newlines=True), file=sys.stderr)
        return ExitCode.USAGE
    report = asyncio.run(_run(config, args))
    print(report.to_json() if args.json else "\n".join(report.lines()))
    return ExitCode.OK if not report.problems else ExitCode.USAGE


async def _run(config: ClusterConfig, args: argparse.Namespace) -> CheckReport:
    router = Router.for_config(config, accept_new_host_keys=args.accept_new_host_keys,
                               insecure_no_host_key_check=False, connect_timeout=args.connect_timeout,
                               warm=False)
    try:
        return await check(config, args.run_dir or config.run_dir, router)
    finally:
        await router.close()
