"""``tfdist-tui import FILE [-o hosts.yaml]``: a hosts.yaml from a cluster that already exists
as a ``TF_CONFIG`` (JSON: the whole variable or just its ``cluster``) or a Kubeflow ``TFJob``
manifest (YAML). What the input does not say is guessed, and the hosts.yaml says so in
comments. Mistakes in the input are reported as ``file:line:column`` and exit 2.

A TFJob whose command is the built-in trainer (``python -m trainer --flags``, as
``tfdist-tui export`` writes it) gives back its ``training:`` settings, so export and import
round-trip to an equivalent hosts.yaml.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from trainer import settings as settings_mod
from tui.common.terminal import one_line
from tui.config.cluster import LOOPBACK, Job, RestartMode
from tui.config.load import parse_port, split_host_port, valid_host
from tui.config.yamlload import MAX_DEPTH, ConfigError, Item, NodeReader, compose, line_column, read_text
from tui.interop.tfjob_schema import KIND, REPLICA_TYPES, RESTART_POLICIES

#: TFJob replica types (and the old ``Master``) as our job names.
_FROM_REPLICA = {**{v: k for k, v in REPLICA_TYPES.items()}, "Master": "chief"}
_TF_CONFIG_KEYS = ("cluster", "task", "environment", "rpc_layer")
_JOB_ORDER = ("ps", "chief", "worker", "evaluator")
_TRAINER = ("-m", "trainer")
#: The most tasks an imported cluster may have (all replica types together): each becomes a
#: process the controller runs, a row on its screen and a line of hosts.yaml, and a far
#: bigger number is a mistake or an attack (``replicas: 1000000000`` would build a list of
#: a billion addresses). A hosts.yaml's own budgets are in :mod:`tui.config.yamlload`.
MAX_REPLICAS = 1000


def supported_jobs(with_program: bool) -> frozenset[str]:
    """The jobs hosts.yaml accepts: ``chief`` and ``evaluator`` only with a ``program:``
    (the built-in trainer's chief is worker 0)."""
    jobs = frozenset(job.value for job in Job)
    return jobs if with_program else jobs & {"ps", "worker"}


@dataclass
class Imported:
    """What an input says about a cluster, in hosts.yaml's terms, plus what was guessed."""

    source: str
    jobs: dict[str, list[str | dict[str, object]]] = field(default_factory=dict)
    training: dict[str, object] = field(default_factory=dict)
    program: list[str] | None = None
    restart: dict[str, tuple[RestartMode, int | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class _Reader(NodeReader):
    """The located-error node walker, pointed at an imported file."""

    def address(self, node: Node, where: str) -> str:
        text = self.text(node, where)
        try:
            host, port = split_host_port(text)
            parse_port(port, allow_auto=False)
        except ValueError as exc:
            raise self.error(node, f"{where}: {exc}") from None
        if not valid_host(host):
            raise self.error(node, f"{where}: {host!r} is not a host name or IP address")
        return text.strip()

    # -- TF_CONFIG --

    def tf_config(self, root: MappingNode) -> Imported:
        items = self.mapping(root, "TF_CONFIG")
        cluster_node: Node = root
        imported = Imported("a TF_CONFIG")
        if "cluster" in items:
            self.check_keys(items, _TF_CONFIG_KEYS, "TF_CONFIG")
            cluster_node = items["cluster"].value
            if "task" in items:
                imported.notes.append("TF_CONFIG's task (one process's role) is left out: "
                                      "every task of the cluster is here")
        cluster = self.mapping(cluster_node, "cluster", "a mapping of job names to address lists")
        self.check_keys(cluster, _JOB_ORDER, "cluster")
        for name, item in cluster.items():
            entries = self.sequence(item.value, f"cluster.{name}", 'a list of "host:port" addresses')
            imported.jobs[name] = [self.address(node, f"cluster.{name}[{i}]")
                                   for i, node in enumerate(entries)]
        hosts = {str(a).rpartition(":")[0] for tasks in imported.jobs.values() for a in tasks}
        remote = sorted(h for h in hosts if h.strip("[]").lower() not in LOOPBACK)
        if remote:
            imported.notes.append(f"{', '.join(remote)}: reached over SSH with default settings "
                                  "(port 22, your user, python3, ~/tfdist); add hosts: entries "
                                  "to change them")
        imported.notes.append("no program or training settings in a TF_CONFIG: the built-in "
                              "trainer's defaults are used")
        return imported

    # -- TFJob --

    def tfjob(self, root: MappingNode) -> Imported:
        top = self.mapping(root, "the manifest")
        spec = self.mapping(self.need(top, "spec", root, "the manifest").value, "spec")
        replicas_node = self.need(spec, "tfReplicaSpecs", root, "spec").value
        replicas = self.mapping(replicas_node, "spec.tfReplicaSpecs", "a mapping of replica types")
        imported = Imported("a TFJob manifest")
        commands: dict[str, list[list[str]]] = {}
        gpus: dict[str, int] = {}
        for replica_type, item in replicas.items():
            where = f"spec.tfReplicaSpecs.{replica_type}"
            job = _FROM_REPLICA.get(replica_type)
            if job is None:
                raise self.error(item.key, f"{where}: unknown replica type; expected one of "
                                           f"{', '.join(_FROM_REPLICA)}")
            replica = self.mapping(item.value, where)
            count = self.integer(replica["replicas"].value, f"{where}.replicas", 1) \
                if "replicas" in replica else 1
            total = count + sum(len(tasks) for tasks in imported.jobs.values())
            if total > MAX_REPLICAS:
                raise self.error(replica["replicas"].value,
                                 f"{where}.replicas: {count} replicas make {total} tasks in all; "
                                 f"at most {MAX_REPLICAS} can be imported")
            if "restartPolicy" in replica:
                imported.restart[job] = self.restart_policy(replica["restartPolicy"].value, where, imported)
            container, container_where = self.container(replica, where, item.value)
            argvs = self.commands(container, container_where, count)
            if argvs:
                commands[job] = argvs
            else:
                imported.notes.append(f"{replica_type} has no command (its image's entry point): "
                                      "it runs the same command as the others")
            gpus[job] = self.gpus(container, container_where)
            imported.jobs[job] = ["localhost:auto"] * count
        if not commands:
            raise self.error(replicas_node, "spec.tfReplicaSpecs: no replica has a "
                             "command (only the images' entry points, which cannot be imported)")
        imported.notes.append("every replica is placed on localhost:auto: TFJob runs them in pods; "
                              "write your machines instead")
        self.program_or_training(commands, gpus, imported)
        backoff = self.optional_integer(spec, "runPolicy", "backoffLimit")
        self.max_restarts(imported, backoff)
        return imported

    def need(self, items: Mapping[str, Item], key: str, node: Node, where: str) -> Item:
        if key not in items:
            raise self.error(node, f"{where}: missing key {key!r}")
        return items[key]

    def optional_integer(self, spec: Mapping[str, Item], section: str, key: str) -> int | None:
        if section not in spec:
            return None
        items = self.mapping(spec[section].value, f"spec.{section}")
        return self.integer(items[key].value, f"spec.{section}.{key}", 0) if key in items else None

    def restart_policy(self, node: Node, where: str, imported: Imported) -> tuple[RestartMode, int | None]:
        value = self.text(node, f"{where}.restartPolicy")
        if value not in RESTART_POLICIES:
            raise self.error(node, f"{where}.restartPolicy: expected one of "
                                   f"{', '.join(RESTART_POLICIES)}, got {value!r}")
        if value == "Never":
            return RestartMode.NEVER, None
        if value != "OnFailure":
            imported.notes.append(f"{where}.restartPolicy {value} is taken as on-failure "
                                  "(restart a task that exits with an error)")
        return RestartMode.ON_FAILURE, None

    def container(self, replica: Mapping[str, Item], where: str, node: Node
                  ) -> tuple[dict[str, Item], str]:
        template = self.mapping(self.need(replica, "template", node, where).value, f"{where}.template")
        pod = self.mapping(self.need(template, "spec", replica["template"].value, f"{where}.template").value,
                           f"{where}.template.spec")
        containers_item = self.need(pod, "containers", template["spec"].value, f"{where}.template.spec")
        containers = self.sequence(containers_item.value, f"{where}.template.spec.containers",
                                   "a list of containers")
        if not containers:
            raise self.error(containers_item.value, f"{where}.template.spec.containers: empty")
        # The operator runs TensorFlow in the container named "tensorflow"; else the first.
        for i, c in enumerate(containers):
            items = self.mapping(c, f"{where}.template.spec.containers[{i}]")
            if "name" in items and isinstance(items["name"].value, ScalarNode) \
                    and items["name"].value.value == "tensorflow":
                return items, f"{where}.template.spec.containers[{i}]"
        return self.mapping(containers[0], where), f"{where}.template.spec.containers[0]"

    def commands(self, container: Mapping[str, Item], where: str, count: int) -> list[list[str]]:
        """Each replica's argv (command + args). ``sh -c 'case ... esac'`` as export writes
        it for replicas whose commands differ is read back per index."""
        argv: list[str] = []
        for key in ("command", "args"):
            if key in container:
                nodes = self.sequence(container[key].value, f"{where}.{key}", "a list of strings")
                argv += [self.text(n, f"{where}.{key}[{i}]") for i, n in enumerate(nodes)]
        if not argv:
            return []  # the image's own entry point: unknown here
        if argv[:2] == ["sh", "-c"] and len(argv) == 3 and argv[2].startswith('case "${HOSTNAME##*-}"'):
            per_index = []
            for part in argv[2].split(";;")[:count]:
                _, _, command = part.partition(") exec ")
                per_index.append(shlex.split(command))
            if len(per_index) == count and all(per_index):
                return per_index
        return [argv] * count

    def gpus(self, container: Mapping[str, Item], where: str) -> int:
        if "resources" not in container:
            return 0
        resources = self.mapping(container["resources"].value, f"{where}.resources")
        best = 0
        for kind in ("limits", "requests"):
            if kind in resources:
                amounts = self.mapping(resources[kind].value, f"{where}.resources.{kind}")
                if "nvidia.com/gpu" in amounts:
                    node = amounts["nvidia.com/gpu"].value
                    best = max(best, self.integer(node, f"{where}.resources.{kind}.nvidia.com/gpu", 0))
        return best

    def program_or_training(self, commands: dict[str, list[list[str]]], gpus: Mapping[str, int],
                            imported: Imported) -> None:
        """The built-in trainer's settings from its flags (the tasks' gpus: where their
        ``--gpus`` differs), else the program's command (gpus: from the GPU requests)."""
        lead = commands.get("chief") or commands.get("worker") or next(iter(commands.values()))
        argv = lead[0]
        if tuple(argv[1:3]) != _TRAINER:
            # program.command reads {name} as a placeholder; a literal brace is doubled.
            imported.program = [arg.replace("{", "{{").replace("}", "}}") for arg in argv]
            if len(commands) > 1 and any(c != lead for c in commands.values()):
                imported.notes.append("the replicas' commands differ: the chief's (else a worker's) "
                                      "is the program's command")
            for job, count in gpus.items():
                if count:
                    imported.jobs[job] = [{"host": "localhost", "port": "auto", "gpus": count}
                                          for _ in imported.jobs[job]]
            return
        defaults = parse_trainer_flags(argv[3:])
        imported.training = {k: v for k, v in defaults.items() if k != "gpus"}
        base_gpus = defaults.get("gpus", settings_mod.TrainingSettings().gpus)
        if "gpus" in defaults:
            imported.training["gpus"] = base_gpus
        for job, argvs in commands.items():
            for index, task_argv in enumerate(argvs):  # jobs without a command keep the defaults
                flags = parse_trainer_flags(task_argv[3:]) if tuple(task_argv[1:3]) == _TRAINER else {}
                task_gpus = flags.get("gpus", base_gpus)
                if task_gpus != base_gpus:
                    imported.jobs[job][index] = {"host": "localhost", "port": "auto", "gpus": task_gpus}

    def max_restarts(self, imported: Imported, backoff: int | None) -> None:
        restarting = [job for job, (mode, _) in imported.restart.items() if mode is RestartMode.ON_FAILURE]
        if not restarting or backoff is None:
            return
        tasks = sum(len(imported.jobs[job]) for job in restarting)
        # Export writes backoffLimit as max_restarts times the number of restartable tasks;
        # a limit written by hand is shared out, rounding up so every task may restart.
        per_task = -(-backoff // tasks) if tasks else 0
        for job in restarting:
            imported.restart[job] = (RestartMode.ON_FAILURE, per_task)
        imported.notes.append(f"max_restarts {per_task} per task is backoffLimit {backoff} spread over "
                              f"{tasks} restartable tasks")


def parse_trainer_flags(argv: Sequence[str]) -> dict[str, object]:
    """The training settings in the built-in trainer's flags, by hosts.yaml key; values as
    hosts.yaml writes them. Unknown flags are ignored (``--hold``, ``--verbose``)."""
    parser = argparse.ArgumentParser(add_help=False)
    settings_mod.add_arguments(parser)
    ns, _ = parser.parse_known_args(list(argv))
    try:
        settings = settings_mod.from_namespace(ns)
    except ValueError as exc:
        raise ValueError(f"the trainer's flags: {exc}") from None
    given = {name for name in settings_mod.FIELD_NAMES if getattr(ns, name) is not None}
    out: dict[str, object] = {}
    for name in settings_mod.FIELD_NAMES:
        if name in given:
            value = getattr(settings, name)
            out[name] = value.value if isinstance(value, Enum) else value
    return out


def check_json_depth(text: str, label: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (hosts.yaml's own budget) as a located
    ConfigError, before a recursive parser meets it."""
    depth = 0
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                line, column = line_column(text, index)
                raise ConfigError(label, line, column,
                                  f"objects and arrays nested more than {limit} deep; "
                                  "a TF_CONFIG is far flatter")
        elif char in "]}":
            depth -= 1


def read_input(path: Path) -> Imported:
    """Parse ``path`` (a TF_CONFIG JSON or a TFJob YAML). Raises located ConfigErrors."""
    label = str(path)
    text = read_text(path, label)
    if text.lstrip().startswith("{"):
        check_json_depth(text, label)  # before json, whose parser recurses per level
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(label, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from None
        # Columns stay where they are: a tab is one character, as a space is.
        text = text.replace("\t", " ")
    root = compose(text, label)
    reader = _Reader(label, path.absolute().parent)
    if root is None:
        raise ConfigError(label, 1, 1, "file is empty; expected a TF_CONFIG (JSON) or a TFJob manifest")
    if not isinstance(root, MappingNode):
        raise reader.error(root, "expected a TF_CONFIG object or a TFJob manifest")
    top = reader.mapping(root, "the top level")
    if "kind" in top:
        kind = reader.text(top["kind"].value, "kind")
        if kind != KIND:
            raise reader.error(top["kind"].value, f"kind: expected {KIND}, got {kind!r}")
        try:
            return reader.tfjob(root)
        except ValueError as exc:  # the trainer's flags in the command
            raise ConfigError(label, None, None, str(exc)) from None
    return reader.tf_config(root)


def hosts_yaml(imported: Imported, source: Path) -> str:
    """The hosts.yaml text for ``imported``: comments first, then the sections."""
    # Comments one line each: a newline in the file's name (or in a value a note quotes)
    # would start YAML of its own, such as a program: to run.
    lines = [f"# Imported by tfdist-tui from {one_line(source.name)} ({one_line(imported.source)}).",
             "# Guessed or left out:"]
    lines += [f"#   - {one_line(note)}" for note in imported.notes]
    jobs = dict(imported.jobs)
    supported = supported_jobs(imported.program is not None)
    if "chief" in jobs and "chief" not in supported:
        # Without a chief job the first worker is the chief: put the chief first among workers.
        jobs["worker"] = jobs.pop("chief") + jobs.get("worker", [])
        lines.append("#   - the chief is worker 0, the built-in trainer's chief (a program: keeps a "
                     "chief job)")
    if "evaluator" in jobs and "evaluator" not in supported:
        jobs.pop("evaluator")
        lines.append("#   - the evaluator is left out: only a program: can have an evaluator job")
    lines.append("")
    lines.append("cluster:")
    for job in _JOB_ORDER:
        if job in jobs:
            lines.append(f"  {job}:")
            lines += [f"    - {_flow(task)}" for task in jobs[job]]
    if imported.program is not None:
        lines += ["", "program:", f"  command: {_flow(imported.program)}"]
    if imported.training:
        lines += ["", "training:"] + [f"  {k}: {_flow(v)}" for k, v in imported.training.items()]
    if imported.restart:
        lines += ["", "restart:"]
        for job, (mode, max_restarts) in imported.restart.items():
            if job in jobs:
                counts = f", max_restarts: {max_restarts}" if max_restarts is not None else ""
                lines.append(f"  {job}: {{policy: {mode.value}{counts}}}")
    return "\n".join(lines) + "\n"


def _flow(value: object) -> str:
    """``value`` as one line of YAML (quoted only where YAML needs it)."""
    if isinstance(value, str) and value and value[0].isalnum():
        try:
            if yaml.safe_load(value) == value:
                return value
        except yaml.YAMLError:
            pass
    return yaml.safe_dump([value], default_flow_style=True, sort_keys=False, width=10_000).strip()[1:-1]
