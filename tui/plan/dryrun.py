"""``tfdist-tui check HOSTS.yaml``: a dry run. Validates the file, asks every host at once
(over the launchers' own connections and their probe snippet, in its ``metadata`` mode:
Python, the installed TensorFlow's version read without importing it, the free disk where
the run writes), checks the fixed ports with the launchers' port check, asks a remote host's
launcher what the host offers and whether the trainer's and the ``upload:`` folder's copies
there match this controller's (or could be uploaded: :mod:`tui.launch.look`), checks that a
Slurm host's partition is there and up with ``sinfo``, and prints the plan: tasks per host,
each task's share of its host (the run's own planner, :mod:`tui.plan.allocation`) and the
placement preview per ps. Every problem is listed (typed: :mod:`tui.plan.check_report`), not
only the first; exit 0 when the run could start, 2 otherwise, 130 on Ctrl-C. Nothing is
started or placed: each probe is one short command that exits."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tui.common.exit_codes import ExitCode
from tui.common.terminal import inert
from tui.common.units import format_bytes
from tui.config.cluster import ClusterConfig, HostKind, HostSpec
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.launch import snippets
from tui.launch.base import DEFAULT_CONNECT_TIMEOUT, LaunchError, PortProblem
from tui.launch.errors import HostError, HostFailure
from tui.launch.probe import HostResources
from tui.launch.router import Router
from tui.plan.allocation import ResourceError, allocate, host_offers
from tui.plan.check_report import CheckReport, HostCheck, Problem, ProblemKind
from tui.plan.preview import PreviewError, preview_placement
from tui.plan.tasks import program_for

#: Less free disk than this where the run writes (logs, checkpoints) is a problem.
MIN_FREE_BYTES = 512 * 1024 * 1024
#: How long one host's probe may take once connected.
PROBE_TIMEOUT = 60.0


async def check(config: ClusterConfig, runs_root: Path, router: Router) -> CheckReport:
    """Every host at once, then the plan: each task's share of its host as the run's own
    planner divides what the hosts offer (a remote host's offer probed as its preparation
    would), and the placement preview, per host."""
    by_host: dict[str, list[str]] = {}
    for task in config.tasks:
        by_host.setdefault(task.host, []).append(task.name)
    # As the run would: a program run without the shim may not use TensorFlow, so a host
    # without it is no problem of the run's.
    needs_tf = program_for(config).checks_tensorflow
    found = await asyncio.gather(*(_host(config, name, tuple(tasks), runs_root, router, needs_tf)
                                   for name, tasks in by_host.items()))
    remote = {check.host: resources for check, resources in found}
    plan_problems: list[Problem] = []
    offers = await asyncio.to_thread(host_offers, config, remote)
    try:
        # Only what is known: a host that did not answer has no shares to show.
        shares = {name: share.describe() for name, share in allocate(config, offers).shares.items()
                  if share.cores}
    except ResourceError as exc:
        shares = {}
        plan_problems.append(Problem(ProblemKind.PLAN, str(exc)))
    ps_bytes: dict[str, int] = {}
    try:
        placement = preview_placement(config, config.training)
        ps_bytes = {task.name: size for task, size in zip(config.ps_tasks, placement.ps_bytes, strict=False)}
        text = (f"{placement.strategy}, {placement.partitions} partition(s); "
                f"max/mean bytes per ps {placement.max_mean_ratio:.2f}")
    except PreviewError as exc:
        text = str(exc)
    hosts = []
    for check, _ in found:
        offer = offers.get(check.host)
        hosts.append(replace(check, offers=offer.describe() if offer is not None else "",
                             shares={t: shares[t] for t in check.tasks if t in shares},
                             ps_bytes={t: ps_bytes[t] for t in check.tasks if t in ps_bytes}))
    return CheckReport(hosts=tuple(hosts), shares=shares, placement=text, plan_problems=tuple(plan_problems))


async def _host(config: ClusterConfig, name: str, tasks: tuple[str, ...], runs_root: Path,
                router: Router, needs_tf: bool = True) -> tuple[HostCheck, HostResources | None]:
    """One host's answers and problems, and what it offers (None: this machine, probed by
    the planner itself, or a host that did not say); a host without TensorFlow is a problem
    only where the run ``needs_tf``."""
    host = config.hosts.get(name) or HostSpec(name=name, address=name)
    if host.launch_kind is HostKind.SLURM:
        return HostCheck(name, tasks, problems=tuple(await _partition(host))), None
    problems: list[Problem] = []
    # As the run would: this machine's tasks use the controller's own Python unless told.
    python = sys.executable if host.is_local and not host.python else host.interpreter
    folder = str(runs_root) if host.is_local else host.workdir
    answer: dict[str, object] = {}
    look = None
    try:
        argv = [python, "-c", snippets.source("probe"), folder, "metadata"]
        found = snippets.parse_result(await asyncio.wait_for(router.run_command(host, argv), PROBE_TIMEOUT))
        if not isinstance(found, dict):
            raise LaunchError(f"{python} did not run the probe")
        answer = found
        if answer.get("tf_error") and needs_tf:
            version = answer.get("python_version")
            problems.append(Problem(ProblemKind.TENSORFLOW, f"TensorFlow: {answer['tf_error']} for {python} "
                                    f"(Python {version}); install it there or set python:", name))
        free = answer.get("disk_free")
        if isinstance(free, int) and free < MIN_FREE_BYTES:
            problems.append(Problem(ProblemKind.DISK, f"only {format_bytes(free)} free in "
                                    f"{answer.get('disk_folder')} (logs and checkpoints go there)", name))
        taken = await _ports(config, host, python, router)
        problems += [Problem(ProblemKind.PORT, str(p), name) for p in taken]
        look = await asyncio.wait_for(router.look(host), PROBE_TIMEOUT)
    except (LaunchError, OSError, asyncio.TimeoutError) as exc:
        problems.append(Problem(_kind_of(exc, bool(answer)), str(exc) or f"did not answer within "
                                f"{PROBE_TIMEOUT:g} s", name))
    copies = look.copies if look is not None else ()
    problems += [Problem(ProblemKind.COPY, c.describe(), name) for c in copies if not c.ok]
    free = answer.get("disk_free")
    return HostCheck(name, tasks, python=str(answer.get("python") or ""),
                     python_version=str(answer.get("python_version") or ""),
                     tf_version=str(answer.get("tf_version") or ""),
                     disk_folder=str(answer.get("disk_folder") or ""),
                     disk_free=free if isinstance(free, int) else None, copies=copies,
                     problems=tuple(problems)), look.resources if look is not None else None


#: Failures of a host that could not be asked anything.
_UNREACHED = frozenset({HostFailure.UNREACHABLE, HostFailure.AUTH_REFUSED, HostFailure.IDENTITY_UNUSABLE,
                        HostFailure.HOST_KEY_UNKNOWN, HostFailure.HOST_KEY_CHANGED,
                        HostFailure.CONNECTION_LOST})


def _kind_of(exc: BaseException, answered: bool) -> ProblemKind:
    """What a failure to ask a host is about: once its Python answered, a later check's; before,
    its connection's (a host's own failure says so) or its interpreter's."""
    if answered or isinstance(exc, asyncio.TimeoutError):
        return ProblemKind.CONNECT
    if isinstance(exc, HostError):
        return ProblemKind.CONNECT if exc.failure in _UNREACHED else ProblemKind.PYTHON
    return ProblemKind.PYTHON if isinstance(exc, (LaunchError, FileNotFoundError, PermissionError)) \
        else ProblemKind.CONNECT


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


async def _partition(host: HostSpec) -> list[Problem]:
    """The Slurm partition named, if any, exists and is up (asked of this machine's Slurm)."""
    partition = host.slurm.partition if host.slurm is not None else None
    if partition is None:
        return []
    if shutil.which("sinfo") is None:
        return [Problem(ProblemKind.PARTITION, f"partition {partition}: sinfo is not on this machine's PATH",
                        host.name)]
    process = await asyncio.create_subprocess_exec(
        "sinfo", "-h", "-p", partition, "-o", "%a", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0 or not out.strip():
        why = err.decode(errors="replace").strip()
        return [Problem(ProblemKind.PARTITION, f"partition {partition} is not one of this cluster's"
                        + (f" ({why})" if why else ""), host.name)]
    states = set(out.decode(errors="replace").split())
    if "up" not in states:
        # An allocation there is queued, not refused: the run would wait, not start.
        return [Problem(ProblemKind.PARTITION, f"partition {partition} is {'/'.join(sorted(states))}: an "
                        f"allocation there would wait until it is up", host.name)]
    return []


def check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui check",
        description="Check, before anything starts, that a run of HOSTS.yaml could start: every "
                    "host answers, has Python and TensorFlow (its version read without importing "
                    "it), free disk, free ports, and the trainer's and upload: folder's copies "
                    "matching (or uploadable); a Slurm host's partition is up. Prints the plan "
                    "(each task's share, each ps's bytes); exits 0 when the run could start, 2 with "
                    "every problem listed, 130 on Ctrl-C.")
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
    try:
        report = asyncio.run(_run(config, args))
    except KeyboardInterrupt:  # the router was closed on the way out: nothing is left on a host
        print("interrupted: nothing was started", file=sys.stderr)
        return ExitCode.INTERRUPTED
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
