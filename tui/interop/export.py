"""``tfdist-tui export HOSTS.yaml --format tfjob|tf-config|shell|slurm``: the cluster for another
launcher. Every format is built from :func:`tui.plan.tasks.plan_run`, the same plan the controller
launches, so a TF_CONFIG or command exported here is the one the controller would give.

- ``tfjob``: a Kubeflow TFJob manifest (:mod:`tui.interop.tfjob`);
- ``tf-config``: one JSON object per line and task: its name, host, TF_CONFIG, environment,
  command (argv) and working directory;
- ``shell``: the commands a person would type, one terminal per task, ps first;
- ``slurm``: an sbatch script, one job step per task (:mod:`tui.interop.slurm_script`).

Ports written ``auto`` have no number until a launch picks one; here each gets the first
port from :data:`FIRST_PORT` up that no other task of its machine uses.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from enum import Enum

import yaml

from tui.common.terminal import one_line
from tui.config.cluster import ClusterConfig, HostSpec, Job, machine_of
from tui.interop.tfjob import TFJobOptions, standalone_program, tfjob_manifest
from tui.plan.tasks import CONTROLLER_ONLY_ENV, TaskPlan, plan_run, shell_path

#: Where ``auto`` ports start (TensorFlow's customary first port).
FIRST_PORT = 2222
#: The run id exported commands carry; no controller run has it.
EXPORT_RUN_ID = "export"


class ExportFormat(str, Enum):
    TFJOB = "tfjob"
    TF_CONFIG = "tf-config"
    SHELL = "shell"
    SLURM = "slurm"


def export_ports(config: ClusterConfig) -> dict[str, int]:
    """Every task's port: its own, or for ``auto`` the lowest free one from FIRST_PORT on
    its machine (machines compared by address, loopback names being one machine)."""
    def machine(host: HostSpec) -> str:
        return machine_of(host.address)

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


def _task_env(plan: TaskPlan, include_env: bool = False) -> dict[str, str]:
    """The task's environment for an export: a host's ``env:`` values (secrets, often) only
    with ``include_env``; the variables the plan adds (TF_CONFIG, thread counts) always."""
    left_out = left_out_env(plan, include_env)
    return {k: v for k, v in plan.env.items() if k not in CONTROLLER_ONLY_ENV and k not in left_out}


def left_out_env(plan: TaskPlan, include_env: bool) -> list[str]:
    """Names of the host's ``env:`` variables an export leaves out (all, unless
    ``include_env``), sorted."""
    if include_env:
        return []
    return sorted(name for name, value in plan.host.env.items() if plan.env.get(name) == value)


#: Said on stderr, and in the output, whenever an export leaves values out.
LEFT_OUT_NOTE = ("env: values of hosts.yaml left out (they may be secrets): {names}; "
                 "pass --include-env to write them")


def tf_config_lines(config: ClusterConfig, include_env: bool = False) -> list[str]:
    """The ``tf-config`` format: one JSON object per task (``env_left_out``: the names of
    the host's variables whose values are not written, see :func:`left_out_env`)."""
    return [json.dumps({"task": p.name, "host": p.spec.host, "address": f"{p.host.address}:{p.port}",
                        "tf_config": json.loads(p.tf_config),
                        "env": {k: v for k, v in _task_env(p, include_env).items() if k != "TF_CONFIG"},
                        "env_left_out": left_out_env(p, include_env),
                        "argv": list(p.argv), "cwd": p.cwd}, separators=(",", ":"))
            for p in export_plans(config)]


def left_out_names(config: ClusterConfig, include_env: bool) -> list[str]:
    """Every variable name an export of ``config`` leaves out, sorted."""
    return sorted({n for p in export_plans(config) for n in left_out_env(p, include_env)})


def shell_script(config: ClusterConfig, include_env: bool = False) -> str:
    """The ``shell`` format: a comment and a command per task, to paste into its terminal."""
    lines = ["# One terminal per task, started in this order: the ps tasks, the chief, the others.",
             "# The built-in trainer's tasks all exit by themselves; a program's servers that",
             "# call server.join() (ps tasks, and TF2's workers) must be stopped with Ctrl-C",
             "# once the training is done."]
    if names := left_out_names(config, include_env):
        lines.append("# " + LEFT_OUT_NOTE.format(names=", ".join(names))
                     + "; export them in each terminal first.")
    base = config.path.parent
    chief = config.chief

    def stage(plan: TaskPlan) -> int:
        return 0 if plan.spec.job is Job.PS else 1 if plan.spec == chief else 2

    for n, plan in enumerate(sorted(export_plans(config), key=stage), start=1):
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in _task_env(plan, include_env).items())
        line = f"{env} {plan.command}"
        lines.append("")
        lines.append(f"# terminal {n}: {one_line(plan.name)} on {one_line(plan.spec.host)}")
        if plan.host.is_local:
            lines.append(f"cd {shlex.quote(plan.cwd or str(base))} && {line}")
            continue
        lines.append("# (needs this project's trainer/ folder, or your program, in the workdir)")
        cd = f"cd {shell_path(plan.cwd)} && " if plan.cwd else ""
        lines.append(f"{_ssh(plan.host, config.hosts)} {shlex.quote(cd + line)}")
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
    # One line each (a newline in a file's name would start YAML of its own).
    header = (f"# Generated by tfdist-tui from {one_line(config.path.name)}. The image must hold "
              f"TensorFlow and\n# {one_line(needs)}.\n"
              "# Apply with: kubectl apply -f FILE (needs Kubeflow's training operator).\n")
    return header + yaml.safe_dump(tfjob_manifest(config, options), sort_keys=False, width=100)
