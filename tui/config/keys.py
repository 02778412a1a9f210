"""Every key of hosts.yaml and the shape of its value, declared once: the loader checks
keys against these tables (:mod:`.load`, :mod:`.slurm`, :mod:`.network`, :mod:`.resources`,
:mod:`.program`) and :mod:`.schema` makes the editors' JSON Schema from them, so the two
cannot disagree about which keys exist. The loader's own checks (ranges, formats, what
depends on what) stay the last word; the schema says what an editor can know alone.

This module imports nothing of the config (the modules that read it are imported by the
ones that define the enums), so the choices of the few enum-valued keys are written out
here; tests/config/test_schema.py holds each equal to its enum."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Shape(Enum):
    """What a value looks like to YAML."""

    TEXT = "text"            # a non-empty scalar, numbers taken as written
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    CHOICE = "choice"        # one of ``choices``
    PORT = "port"            # 1..65535
    PORT_OR_AUTO = "port_or_auto"
    TEXT_LIST = "text_list"  # a list of texts
    ENV = "env"              # a mapping of variable names to scalars
    COMMAND = "command"      # a command line, or a list of its arguments
    SECTION = "section"      # a mapping described by a table of its own


@dataclass(frozen=True)
class Value:
    """One key's value: its shape, a smallest value for numbers, the choices of a CHOICE,
    and one line for an editor's hover."""

    shape: Shape
    help: str
    minimum: float | None = None
    choices: tuple[str, ...] = ()


def _choice(help: str, *choices: str) -> Value:
    return Value(Shape.CHOICE, help, choices=choices)


TOP = {
    "hosts": Value(Shape.SECTION, "how to reach each machine named in cluster:"),
    "cluster": Value(Shape.SECTION, "the tasks of each job: host:port, host:auto or a mapping"),
    "training": Value(Shape.SECTION, "the built-in trainer's settings, or a program's values"),
    "run_dir": Value(Shape.TEXT, "where run directories go (relative to this file)"),
    "restart": Value(Shape.SECTION, "what happens when a task fails, for all jobs or per job"),
    "program": Value(Shape.SECTION, "your own training program, run in every task"),
    "resources": Value(Shape.SECTION, "threads, pinning and per-job or per-task core shares"),
    "network": Value(Shape.SECTION, "how many hosts are prepared at once, how long one may be out of reach"),
}
#: A hosts: entry of any kind; SLURM_HOST adds the keys only a kind: slurm entry has.
HOST = {
    "address": Value(Shape.TEXT, "host name or IP address (default: the entry's name)"),
    "port": Value(Shape.PORT, "SSH port"),
    "user": Value(Shape.TEXT, "SSH user"),
    "identity": Value(Shape.TEXT, "SSH private key file"),
    "known_hosts": Value(Shape.TEXT, "known_hosts file to check the host key against"),
    "jump": Value(Shape.TEXT, "another hosts entry or [user@]host[:port] to reach it through"),
    "python": Value(Shape.TEXT, "the Python interpreter that has TensorFlow"),
    "workdir": Value(Shape.TEXT, "the folder tasks run in"),
    "env": Value(Shape.ENV, "environment variables of every task on the host"),
    "kind": _choice("how tasks start there (cluster.HostKind)", "local", "ssh", "slurm"),
    "warm": Value(Shape.BOOLEAN, "import TensorFlow once per host and fork each task (default true)"),
}
SLURM_HOST = {
    "partition": Value(Shape.TEXT, "the Slurm partition to allocate in"),
    "nodes": Value(Shape.INTEGER, "how many nodes to allocate", minimum=1),
    "time": Value(Shape.TEXT, 'time limit: minutes, "HH:MM:SS" or "D-HH:MM:SS"'),
    "account": Value(Shape.TEXT, "the Slurm account to charge"),
    "extra": Value(Shape.TEXT_LIST, "more salloc options, e.g. [--qos=normal]"),
    "pending_timeout": Value(Shape.NUMBER, "seconds the allocation may stay pending", minimum=1),
}
#: cluster.Job's values: the jobs of cluster: (and of restart: and resources:).
JOBS = ("ps", "worker", "chief", "evaluator")
#: A task given as a mapping instead of host:port.
TASK = {
    "host": Value(Shape.TEXT, "a hosts entry, host name or address"),
    "port": Value(Shape.PORT_OR_AUTO, "the task's port, or auto"),
    "gpus": Value(Shape.INTEGER, "GPUs the task gets", minimum=0),
    "node": Value(Shape.TEXT, "the node of a kind: slurm allocation it runs on"),
}
POLICY = {
    "policy": _choice("when a failed task is started again", "never", "on-failure"),
    "max_restarts": Value(Shape.INTEGER, "restarts per task before the run fails", minimum=0),
    "backoff": Value(Shape.NUMBER, "seconds before the first restart (doubling)", minimum=0),
    "window": Value(Shape.NUMBER, "seconds within which max_restarts counts; 0: the whole run",
                    minimum=0),
}
PROGRAM = {
    "command": Value(Shape.COMMAND, "what every task runs, with placeholders like {job} and {index}"),
    "upload": Value(Shape.TEXT, "a folder copied to every remote host"),
    "batch_size": Value(Shape.INTEGER, "examples per step, for throughput", minimum=1),
    "metrics": Value(Shape.TEXT_LIST, "regular expressions with named groups for step, loss, ..."),
    "shim": Value(Shape.BOOLEAN, "run a Python program under the reporting shim (default true)"),
}
NETWORK = {
    "unreachable_timeout": Value(Shape.NUMBER, "seconds a host may stay out of reach", minimum=1),
    "lease": Value(Shape.NUMBER, "seconds a remote task runs on without word from the controller",
                   minimum=3),
    "hosts_at_once": Value(Shape.INTEGER, "remote hosts connected and prepared at a time", minimum=1),
    "on_host_failure": _choice("a host that fails its preparation: fail the run, or start without "
                               "its tasks (non-chief workers only)", "fail", "start_without"),
}
RESOURCES = {
    "threads": _choice("auto: thread pools from each task's share of cores; tensorflow: TF's own",
                       "auto", "tensorflow"),
    "pin": Value(Shape.BOOLEAN, "pin each task to its cores"),
    "memory_growth": Value(Shape.BOOLEAN, "let TensorFlow grow GPU memory as needed"),
}
#: A per-job or per-task entry of resources:.
RESOURCE_OVERRIDE = {
    "cores": Value(Shape.INTEGER, "cores of the host for this job's tasks (or this task)", minimum=1),
    "intra_op": Value(Shape.INTEGER, "TensorFlow's intra-op threads", minimum=1),
    "inter_op": Value(Shape.INTEGER, "TensorFlow's inter-op threads", minimum=1),
}
