"""hosts.yaml -> frozen dataclasses. Every mistake is reported as ``file:line:column: what
was expected``; see :func:`load_config`.

The file is read into a node tree with positions, on a budget (:mod:`tui.config.yamlload`), then
walked by hand against the schema below. Training settings are validated by
:mod:`trainer.settings`, the single source of their names, types and allowed values."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node

from trainer.settings import FIELD_NAMES, TrainingSettings, convert, shown
from tui.config import keys
from tui.config import network as network_settings
from tui.config import program as program_section
from tui.config import resources as resource_settings
from tui.config import slurm as slurm_settings
from tui.config.cluster import (
    LOCALHOST,
    ClusterConfig,
    HostKind,
    HostSpec,
    Job,
    RestartMode,
    RestartPolicy,
    TaskSpec,
    machine_of,
)
from tui.config.program_source import check_coordinator
from tui.config.program_spec import ProgramSpec
from tui.config.training import training_setting
from tui.config.yamlload import (
    NULL_TAG,
    ConfigError,
    Item,
    NodeReader,
    bool_hint,
    compose,
    did_you_mean,
    present,
    read_text,
)

# Re-exported: callers take the config's types and its error from here.
__all__ = ["LOCALHOST", "ClusterConfig", "ConfigError", "HostKind", "HostSpec", "Job", "RestartMode",
           "RestartPolicy", "TaskSpec", "apply_overrides", "load_config", "with_restart_mode"]

def load_config(path: str | Path) -> ClusterConfig:
    """Read and validate a hosts.yaml. Raises :class:`ConfigError`, never anything else."""
    label = str(path)
    file = Path(path)
    text = read_text(file, label)
    root = compose(text, label)
    return _Loader(label, file.absolute().parent).cluster_config(root, file.absolute())


def apply_overrides(config: ClusterConfig, **changes: object) -> ClusterConfig:
    """A copy of ``config`` with some training settings changed, e.g. from command-line flags
    (``mode="sync"``, ``steps="500"``). Values are converted as in hosts.yaml; a ``None`` value
    means "flag not given" and changes nothing. Raises :class:`ConfigError` located at
    ``command line`` for an unknown setting or an invalid value."""
    converted: dict[str, Any] = {}
    for name, raw in changes.items():
        if raw is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name not in FIELD_NAMES:
            raise _command_line_error(f"unknown setting {flag}{did_you_mean(name, FIELD_NAMES)}")
        try:
            converted[name] = convert(name, raw)
        except ValueError as exc:
            raise _command_line_error(f"{flag}: {exc}") from None
    training = dataclasses.replace(config.training, **converted)
    for name, problem in training.problems(len(config.worker_tasks)):
        raise _command_line_error(f"--{name.replace('_', '-')}: {problem}")
    return dataclasses.replace(config, training=training)


def with_restart_mode(config: ClusterConfig, mode: RestartMode) -> ClusterConfig:
    """``--restart MODE``: the policy of every job becomes ``mode`` (the evaluator's own
    default too); the counts and backoff written in hosts.yaml are kept."""
    overrides = {job: dataclasses.replace(p, policy=mode) for job, p in config.restart_overrides.items()}
    overrides.setdefault(Job.EVALUATOR, dataclasses.replace(config.restart, policy=mode))
    return dataclasses.replace(config, restart=dataclasses.replace(config.restart, policy=mode),
                               restart_overrides=overrides)


def _command_line_error(message: str) -> ConfigError:
    return ConfigError("command line", None, None, message)


_TOP_KEYS = tuple(keys.TOP)
_HOST_KEYS = tuple(keys.HOST)
_HOST_TEXT_KEYS = ("address", "user", "identity", "known_hosts", "jump", "python", "workdir")
_JOB_KEYS = keys.JOBS
#: Jobs only a user's program can have.
_PROGRAM_JOBS = frozenset({Job.CHIEF, Job.EVALUATOR})
_TASK_KEYS = tuple(keys.TASK)
_POLICY_KEYS = tuple(keys.POLICY)
_RESTART_KEYS = _POLICY_KEYS + _JOB_KEYS
_POLICY_EXPECTED = "a mapping of policy:, max_restarts:, backoff:, window:"
_DEFAULT_RUN_DIR = "runs"
#: When a training problem concerns a setting absent from the file, point at a related one.
_RELATED_SETTING = {"batch_size": "gpus"}

_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Addresses that all mean "this machine", so tasks on them share one set of ports.


class _Loader(NodeReader):
    """Walks one hosts.yaml node tree against the schema, raising located ConfigErrors."""

    def port(self, node: Node, where: str, allow_auto: bool) -> int | None:
        value = self.typed(self.scalar(node, where, _port_expectation(allow_auto)), where)
        try:
            return parse_port(value, allow_auto)
        except ValueError as exc:
            raise self.error(node, f"{where}: {exc}{bool_hint(node)}") from None


    def cluster_config(self, root: Node | None, path: Path) -> ClusterConfig:
        if root is None:
            raise ConfigError(self.label, 1, 1, "file is empty; expected a mapping with at least "
                                                "cluster: (and usually hosts: and training:)")
        top = self.mapping(root, "the top level", "a mapping with hosts:, cluster: and training:")
        self.check_keys(top, _TOP_KEYS, "the top level")
        hosts = self.hosts(top["hosts"].value) if "hosts" in top else {}
        if "cluster" not in top:
            raise self.error(root, "missing key 'cluster' (the ps and worker tasks), "
                                   "e.g. cluster: {ps: [localhost:auto], worker: [localhost:auto]}")
        tasks = self.cluster(top["cluster"], hosts, user_program="program" in top)
        program: ProgramSpec | None = None
        if "program" in top:
            # The user's program reads its own section and takes training: as free-form values.
            # Local tasks run with the controller's own Python unless a host says otherwise.
            local_python = all((host := hosts.get(t.host) or HostSpec(name=t.host, address=t.host)).is_local
                               and not host.python for t in tasks)
            training, program = program_section.load(self, top["program"], top.get("training"),
                                                     local_python=local_python)
            check_coordinator(self, top["cluster"].key, program, tasks)
        else:
            training = self.training(top.get("training"), root, sum(t.job is Job.WORKER for t in tasks))
        restart, overrides = self.restart(top["restart"].value) if "restart" in top else (RestartPolicy(), {})
        run_dir = self.run_dir(top["run_dir"].value) if "run_dir" in top \
            else (self.base_dir / _DEFAULT_RUN_DIR).resolve()
        resources = resource_settings.load(self, top.get("resources"), _JOB_KEYS, (t.name for t in tasks))
        network = network_settings.load(self, top.get("network"))
        return ClusterConfig(path=path, hosts=hosts, tasks=tasks, training=training,
                             run_dir=run_dir, restart=restart, restart_overrides=overrides, program=program,
                             resources=resources, network=network)

    def hosts(self, node: Node) -> dict[str, HostSpec]:
        items = self.mapping(node, "hosts", "a mapping of host names to how to reach them")
        hosts: dict[str, HostSpec] = {}
        jumps: dict[str, Node] = {}
        for name, item in items.items():
            if not _HOST_NAME.fullmatch(name):
                raise self.error(item.key, f"hosts: {shown(name)} is not a valid host name "
                                           "(letters, digits, '.', '-', '_')")
            hosts[name], jump_node = self.host(name, item.value)
            if jump_node is not None:
                jumps[name] = jump_node
        # Jumps name other entries, so they can only be checked once all entries are read.
        for name, jump_node in jumps.items():
            self.check_jump(name, jump_node, hosts)
        return hosts

    def host(self, name: str, node: Node) -> tuple[HostSpec, Node | None]:
        """One hosts entry, and the node of its jump: (if any) for checking later."""
        where = f"hosts.{name}"
        items = self.mapping(node, where, "a mapping of address:, port:, user:, ...")
        self.check_keys(items, _HOST_KEYS + slurm_settings.KEYS, where)
        fields: dict[str, object] = {"name": name, "address": name}
        for key in _HOST_TEXT_KEYS:
            if key in items:
                fields[key] = self.text(items[key].value, f"{where}.{key}")
        if "address" in items:
            self.check_address(str(fields["address"]), items["address"].value, f"{where}.address")
        if "port" in items:
            fields["port"] = self.port(items["port"].value, f"{where}.port", allow_auto=False)
        if "env" in items:
            fields["env"] = self.env(items["env"].value, f"{where}.env")
        if "kind" in items:
            fields["kind"] = self.choice(items["kind"].value, f"{where}.kind", HostKind)
        fields["slurm"] = slurm_settings.load(self, items, where, fields.get("kind") is HostKind.SLURM)
        if "warm" in items:
            fields["warm"] = self.boolean(items["warm"].value, f"{where}.warm")
        spec = HostSpec(**fields)  # type: ignore[arg-type]  # keys and types checked above
        return spec, items["jump"].value if "jump" in items else None

    def check_address(self, address: str, node: Node, where: str) -> None:
        if not valid_host(address):
            raise self.error(node, f"{where}: {shown(address)} is not a host name or IP address")

    def env(self, node: Node, where: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for name, item in self.mapping(node, where, "a mapping of variable names to values").items():
            if not _ENV_NAME.fullmatch(name):
                raise self.error(item.key, f"{where}: {shown(name)} is not a valid environment variable name")
            value = self.scalar(item.value, f"{where}.{name}", 'a single value (text or a number)')
            if value.tag == NULL_TAG:
                raise self.error(item.value, f'{where}.{name}: expected a value; write "" for an empty one')
            self.check_usable(value, f"{where}.{name}")
            env[name] = str(value.value)  # as written: "0" stays "0", "yes" stays "yes"
        return env

    def check_jump(self, name: str, node: Node, hosts: Mapping[str, HostSpec]) -> None:
        """A jump is another hosts entry or ``[user@]host[:port]`` (commas chain several, as
        in ssh -J). Entries must not jump in a circle."""
        where = f"hosts.{name}.jump"
        for hop in (part.strip() for part in str(hosts[name].jump).split(",")):
            if hop in hosts:
                self.check_jump_loop(name, node, hosts, where)
                continue
            host, _, port = hop.rpartition("@")[2].partition(":")
            if not valid_host(host.strip("[]")):
                raise self.error(node, f"{where}: expected a hosts entry or [user@]host[:port], "
                                       f"got {shown(hop)}")
            if port:
                try:
                    parse_port(port, allow_auto=False)
                except ValueError as exc:
                    raise self.error(node, f"{where}: {exc}") from None

    def check_jump_loop(self, name: str, node: Node, hosts: Mapping[str, HostSpec], where: str) -> None:
        chain = [name]
        current = hosts[name].jump
        while current is not None and current in hosts:
            chain.append(current)
            if current == name:
                raise self.error(node, f"{where}: jump hosts form a loop: {' -> '.join(chain)}")
            if chain.count(current) > 1:
                return  # a loop further on, reported at its own entry
            current = hosts[current].jump

    def cluster(self, item: Item, hosts: Mapping[str, HostSpec],
                user_program: bool = False) -> tuple[TaskSpec, ...]:
        """The tasks. ``chief`` and ``evaluator`` jobs exist only for a user's program (the
        built-in trainer's chief is worker 0); with a chief, workers are optional."""
        items = self.mapping(item.value, "cluster", "a mapping with ps: and worker: lists")
        self.check_keys(items, _JOB_KEYS, "cluster")
        placed: list[tuple[TaskSpec, Node]] = []
        for job in Job:
            if job in _PROGRAM_JOBS and job.value in items and not user_program:
                article = "an" if job.value[0] in "aeiou" else "a"
                raise self.error(items[job.value].key,
                                 f"cluster.{job.value}: {article} {job.value} job needs a program: "
                                 f"section (the built-in trainer's chief is worker 0)")
            optional = job is Job.EVALUATOR or (job is Job.CHIEF and user_program) or \
                (job is Job.WORKER and "chief" in items)
            entries = self.job_entries(job, items, item, optional or job in _PROGRAM_JOBS)
            if job is Job.CHIEF and len(entries) > 1:
                raise self.error(entries[1], "cluster.chief: a cluster has one chief at most")
            placed += [(self.task(job, index, node), node) for index, node in enumerate(entries)]
        self.check_unique_ports(placed, hosts)
        for task, at in placed:
            entry = hosts.get(task.host)
            if task.node is not None and (entry is None or entry.launch_kind is not HostKind.SLURM):
                raise self.error(at, f"{task.name}: node: names a node of a kind: slurm host's "
                                     f"allocation; {task.host} is not one")
        return tuple(task for task, _ in placed)

    def job_entries(self, job: Job, items: Mapping[str, Item], cluster: Item,
                    optional: bool = False) -> list[Node]:
        """The task nodes of one job; at least one is required unless ``optional``."""
        example = f"e.g. {job.value}: [localhost:auto]"
        item = items.get(job.value)
        entries = self.sequence(item.value, f"cluster.{job.value}", f"a list of host:port tasks, {example}") \
            if item else []
        if not entries and not optional:
            # Point at the empty list if there is one, else at the key or section lacking it.
            at = present(item) if item else present(cluster)
            raise self.error(at, f"cluster needs at least one {job.value} task, {example}")
        return entries

    def task(self, job: Job, index: int, node: Node) -> TaskSpec:
        where = f"cluster.{job.value}[{index}]"
        if isinstance(node, MappingNode):
            items = self.mapping(node, where)
            self.check_keys(items, _TASK_KEYS, where)
            if "host" not in items:
                raise self.error(node, f"{where}: missing key 'host'")
            host = self.text(items["host"].value, f"{where}.host")
            port = self.port(items["port"].value, f"{where}.port", True) if "port" in items else None
            gpus = self.integer(items["gpus"].value, f"{where}.gpus", 0) if "gpus" in items else None
            on_node = self.text(items["node"].value, f"{where}.node") if "node" in items else None
            host_node = items["host"].value
        else:
            text = self.text(node, where)
            try:
                host, port_text = split_host_port(text)
                port = parse_port(port_text, allow_auto=True)
            except ValueError as exc:
                raise self.error(node, f"{where}: {exc}") from None
            gpus, host_node, on_node = None, node, None
        if not valid_host(host):
            hint = "; put the user in a hosts: entry" if "@" in host else ""
            raise self.error(host_node, f"{where}: {shown(host)} is not a host name or IP address{hint}")
        return TaskSpec(job=job, index=index, host=host, port=port, gpus=gpus, node=on_node)

    def check_unique_ports(self, placed: list[tuple[TaskSpec, Node]], hosts: Mapping[str, HostSpec]) -> None:
        """Two tasks cannot listen on one machine's port. Machines are compared by address, so
        ``localhost`` and ``127.0.0.1``, or an entry and its address, are the same machine."""
        taken: dict[tuple[str, int], tuple[TaskSpec, Node]] = {}
        for task, node in placed:
            if task.port is None:
                continue  # auto ports are picked free at launch
            spec = hosts.get(task.host)
            key = (machine_of(spec.address if spec else task.host), task.port)
            if key in taken:
                other, other_node = taken[key]
                mark = other_node.start_mark
                raise self.error(node, f"{task.name} uses {task.host}:{task.port}, already taken by "
                                       f"{other.name} at line {mark.line + 1}, column {mark.column + 1}")
            taken[key] = (task, node)

    def training(self, item: Item | None, root: Node, num_workers: int) -> TrainingSettings:
        items = self.mapping(item.value, "training", "a mapping of training settings") if item else {}
        self.check_keys(items, FIELD_NAMES, "training")
        values: dict[str, Any] = {name: training_setting(self, name, entry.value)
                                  for name, entry in items.items()}
        settings = dataclasses.replace(TrainingSettings(), **values)
        for name, problem in settings.problems(num_workers):
            raise self.error(_problem_node(name, items, item, root), f"training.{name}: {problem}")
        return settings

    def restart(self, node: Node) -> tuple[RestartPolicy, dict[Job, RestartPolicy]]:
        items = self.mapping(node, "restart", _POLICY_EXPECTED)
        self.check_keys(items, _RESTART_KEYS, "restart")
        base = self.policy(items, RestartPolicy(), "restart")
        overrides: dict[Job, RestartPolicy] = {}
        for job in Job:
            if job.value in items:
                where = f"restart.{job.value}"
                job_items = self.mapping(items[job.value].value, where, _POLICY_EXPECTED)
                self.check_keys(job_items, _POLICY_KEYS, where)
                overrides[job] = self.policy(job_items, base, where)
        return base, overrides

    def policy(self, items: Mapping[str, Item], base: RestartPolicy, where: str) -> RestartPolicy:
        """``base`` with the policy fields present in ``items`` replaced."""
        policy = base
        if "policy" in items:
            mode = self.choice(items["policy"].value, f"{where}.policy", RestartMode)
            policy = dataclasses.replace(policy, policy=mode)
        if "max_restarts" in items:
            policy = dataclasses.replace(
                policy, max_restarts=self.integer(items["max_restarts"].value, f"{where}.max_restarts", 0))
        if "backoff" in items:
            policy = dataclasses.replace(
                policy, backoff=self.number(items["backoff"].value, f"{where}.backoff", 0.0))
        if "window" in items:
            policy = dataclasses.replace(
                policy, window=self.number(items["window"].value, f"{where}.window", 0.0))
        return policy

    def run_dir(self, node: Node) -> Path:
        """The run directory, absolute; a relative one is taken from the file's directory."""
        run_dir = self.base_dir / Path(self.text(node, "run_dir")).expanduser()  # "/" keeps absolute
        try:
            return run_dir.resolve()
        except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
            raise self.error(node, f"run_dir: cannot be used: {exc}") from None


# --- Small pure helpers -------------------------------------------------------------------


def _problem_node(name: str, items: Mapping[str, Item], training: Item | None, root: Node) -> Node:
    """Where to point about a problem with setting ``name``: its value, else a related
    setting's value, else the training: key, else the whole file (all settings defaulted)."""
    for candidate in (name, _RELATED_SETTING.get(name, name)):
        if candidate in items:
            return items[candidate].value
    return training.key if training else root


def _port_expectation(allow_auto: bool) -> str:
    return "a port number from 1 to 65535" + (" or auto" if allow_auto else "")


def parse_port(value: object, allow_auto: bool) -> int | None:
    """A port from a YAML value or the text after ``host:``; None for ``auto``."""
    expected = _port_expectation(allow_auto)
    if allow_auto and value == "auto":
        return None
    number: int | None = None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    if number is None:
        raise ValueError(f"expected {expected}, got {shown(value)}")
    if not 1 <= number <= 65535:
        raise ValueError(f"port {number} is out of range; expected {expected}")
    return number


def split_host_port(text: str) -> tuple[str, str]:
    """``host:port`` or ``[ipv6]:port`` -> (host, port text)."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or text[end + 1:end + 2] != ":":
            raise ValueError(f"expected [address]:port, e.g. [::1]:2222, got {shown(text)}")
        return text[1:end], text[end + 2:]
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise ValueError(f"expected host:port or host:auto, e.g. localhost:2222, got {shown(text)}")
    if ":" in host:
        raise ValueError(f"an IPv6 address needs brackets, e.g. [::1]:2222, got {shown(text)}")
    return host, port


def valid_host(host: str) -> bool:
    """A host name (or ssh alias), an IPv4 address or an IPv6 address without brackets."""
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return bool(_HOST_NAME.fullmatch(host))
