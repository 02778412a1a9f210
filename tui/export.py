"""``tfdist-tui export HOSTS.yaml --format tfjob|tf-config|shell|slurm``: the cluster for another
launcher. Every format is built from :func:`tui.plan.plan_run`, the same plan the controller
launches, so a TF_CONFIG or command exported here is the one the controller would give.

- ``tfjob``: a Kubeflow TFJob manifest (:mod:`tui.tfjob`);
- ``tf-config``: one JSON object per line and task: its name, host, TF_CONFIG, environment,
  command (argv) and working directory;
- ``shell``: the commands a person would type, one terminal per task, ps first;
- ``slurm``: an sbatch script, one job step per task (:mod:`tui.slurm_script`).

Ports written ``auto`` have no number until a launch picks one; here each gets the first
port from :data:`FIRST_PORT` up that no other task of its machine uses.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping
from enum import Enum
from pathlib import Path

import yaml

from tui import textcommand
from tui.config import LOCALHOST, ClusterConfig, ConfigError, HostSpec, Job, load_config
from tui.plan import CONTROLLER_ONLY_ENV, TaskPlan, plan_run
from tui.tfjob import ExportError, TFJobOptions, job_name_from, standalone_program, tfjob_manifest

#: Where ``auto`` ports start (TensorFlow's customary first port).
FIRST_PORT = 2222
#: The run id exported commands carry; no controller run has it.
EXPORT_RUN_ID = "export"
_LOOPBACK = frozenset({LOCALHOST, "127.0.0.1", "::1"})


class ExportFormat(str, Enum):
    TFJOB = "tfjob"
    TF_CONFIG = "tf-config"
    SHELL = "shell"
    SLURM = "slurm"


def export_ports(config: ClusterConfig) -> dict[str, int]:
    """Every task's port: its own, or for ``auto`` the lowest free one from FIRST_PORT on
    its machine (machines compared by address, loopback names being one machine)."""
    def machine(host: HostSpec) -> str:
        address = host.address.lower()
        return LOCALHOST if address in _LOOPBACK else address

    taken: dict[str, set[int]] = {}
    for task in config.tasks:
        if task.port is not None:
            taken.setdefault(machine(config.host_of(task)), set()).add(task.port)
    ports: dict[str, int] = {}
    for task in config.tasks:
        if task.port is not None:
            ports[task.name] = task.port
            continue
        used = taken.setdefault(machine(config.host_of(task)), set())
        port = FIRST_PORT
        while port in used:
            port += 1
        used.add(port)
        ports[task.name] = port
    return ports


def export_plans(config: ClusterConfig) -> tuple[TaskPlan, ...]:
    """The plans of a run of ``config`` on :func:`export_ports`, started without the controller
    (no hold for its "go"); checkpoints only where ``checkpoint_dir`` says."""
    return plan_run(config, config.training, export_ports(config), EXPORT_RUN_ID,
                    program=standalone_program(config))


def _task_env(plan: TaskPlan) -> dict[str, str]:
    return {k: v for k, v in plan.env.items() if k not in CONTROLLER_ONLY_ENV}


def tf_config_lines(config: ClusterConfig) -> list[str]:
    """The ``tf-config`` format: one JSON object per task."""
    return [json.dumps({"task": p.name, "host": p.spec.host, "address": f"{p.host.address}:{p.port}",
                        "tf_config": json.loads(p.tf_config),
                        "env": {k: v for k, v in _task_env(p).items() if k != "TF_CONFIG"},
                        "argv": list(p.argv), "cwd": p.cwd}, separators=(",", ":"))
            for p in export_plans(config)]


def shell_script(config: ClusterConfig) -> str:
    """The ``shell`` format: a comment and a command per task, to paste into its terminal."""
    lines = ["# One terminal per task, started in this order: the ps tasks, the chief, the others.",
             "# The built-in trainer's tasks all exit by themselves; a program's servers that",
             "# call server.join() (ps tasks, and TF2's workers) must be stopped with Ctrl-C",
             "# once the training is done."]
    base = config.path.parent
    chief = config.chief

    def stage(plan: TaskPlan) -> int:
        return 0 if plan.spec.job is Job.PS else 1 if plan.spec == chief else 2

    for n, plan in enumerate(sorted(export_plans(config), key=stage), start=1):
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in _task_env(plan).items())
        line = f"{env} {plan.command}"
        lines.append("")
        lines.append(f"# terminal {n}: {plan.name} on {plan.spec.host}")
        if plan.host.is_local:
            lines.append(f"cd {shlex.quote(plan.cwd or str(base))} && {line}")
            continue
        lines.append("# (needs this project's trainer/ folder, or your program, in the workdir)")
        lines.append(f"{_ssh(plan.host, config.hosts)} {shlex.quote(f'cd {plan.cwd} && {line}')}")
    return "\n".join(lines) + "\n"


def _ssh(host: HostSpec, hosts: Mapping[str, HostSpec]) -> str:
    argv = ["ssh", "-t"]
    if host.port != 22:
        argv += ["-p", str(host.port)]
    if host.identity:
        argv += ["-i", host.identity]
    if host.jump:
        hops = [part.strip() for part in host.jump.split(",")]
        argv += ["-J", ",".join(_hop(hosts[h]) if h in hosts else h for h in hops)]
    return shlex.join([*argv, _destination(host)])


def _destination(host: HostSpec) -> str:
    return f"{host.user}@{host.address}" if host.user else host.address


def _hop(host: HostSpec) -> str:
    """A hosts entry as ssh -J writes a hop: ``[user@]host[:port]``."""
    return _destination(host) + (f":{host.port}" if host.port != 22 else "")


def tfjob_yaml(config: ClusterConfig, options: TFJobOptions) -> str:
    """The ``tfjob`` format: the manifest with a few comments on what it assumes."""
    if config.program is None:
        needs = "this project's trainer/ package (the built-in trainer)"
    else:
        folder = config.program.upload or config.program.base_dir
        needs = f"the program, as {folder} holds it, in its working directory"
    header = (f"# Generated by tfdist-tui from {config.path.name}. The image must hold TensorFlow and\n"
              f"# {needs}.\n"
              "# Apply with: kubectl apply -f FILE (needs Kubeflow's training operator).\n")
    return header + yaml.safe_dump(tfjob_manifest(config, options), sort_keys=False, width=100)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui export",
        description="Print the cluster of HOSTS.yaml for another launcher: a Kubeflow TFJob, "
                    "each task's TF_CONFIG and command, shell commands to type by hand, or an "
                    "sbatch script for Slurm.")
    parser.add_argument("hosts", metavar="HOSTS.yaml", type=Path)
    parser.add_argument("--format", choices=[f.value for f in ExportFormat], default="tfjob")
    parser.add_argument("--image", default=TFJobOptions.image,
                        help=f"tfjob: the container image (default {TFJobOptions.image})")
    parser.add_argument("--name", help="tfjob: the job's name (default: from the file's name)")
    parser.add_argument("--namespace", default=TFJobOptions.namespace,
                        help="tfjob: the Kubernetes namespace (default: default)")
    textcommand.add_output_arguments(parser, "the export")
    return parser


def _make(args: argparse.Namespace) -> str:
    config = load_config(args.hosts)
    fmt = ExportFormat(args.format)
    if fmt is ExportFormat.TFJOB:
        name = args.name or job_name_from(args.hosts.stem)
        return tfjob_yaml(config, TFJobOptions(name, args.namespace, args.image))
    if fmt is ExportFormat.TF_CONFIG:
        return "\n".join(tf_config_lines(config)) + "\n"
    if fmt is ExportFormat.SLURM:
        from tui.slurm_script import sbatch_script

        return sbatch_script(config, export_ports(config))
    return shell_script(config)


def main(argv: list[str]) -> int:
    """``tfdist-tui export``; returns the exit code."""
    return textcommand.run(build_parser(), argv, _make, (ConfigError, ExportError))
