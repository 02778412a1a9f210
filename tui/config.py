"""hosts.yaml -> frozen dataclasses. Every mistake is reported as ``file:line:column: what
was expected``; see :func:`load_config`.

The file is read with ``yaml.compose`` rather than ``yaml.safe_load`` so that every key and
value keeps its position (a node tree with marks); the tree is then walked by hand against the
schema below. Training settings are validated by :mod:`trainer.settings`, the single source
of their names, types and allowed values."""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from trainer.settings import FIELD_NAMES, FIELD_TYPES, TrainingSettings, choices, convert
from tui.program import section as program_section
from tui.program.spec import ProgramSpec

LOCALHOST = "localhost"
_E = TypeVar("_E", bound=Enum)


class Job(str, Enum):
    """A task's job in the cluster. ``chief`` and ``evaluator`` follow TensorFlow 2's
    TF_CONFIG conventions and are accepted only for a user's ``program:``."""

    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


class HostKind(str, Enum):
    """How a host's tasks are launched (:mod:`tui.launch.kinds` maps each to a launcher)."""

    LOCAL = "local"
    SSH = "ssh"


@dataclass(frozen=True)
class HostSpec:
    """How to reach one machine. ``localhost`` needs no entry and is never reached over SSH."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    jump: str | None = None
    python: str = "python3"
    workdir: str = "~/tfdist"
    env: Mapping[str, str] = field(default_factory=dict)
    #: ``kind:`` as written; None infers it: ``localhost`` is local, every other host SSH.
    kind: HostKind | None = None

    @property
    def launch_kind(self) -> HostKind:
        """The kind of launcher that starts this host's tasks."""
        if self.kind is not None:
            return self.kind
        return HostKind.LOCAL if self.name == LOCALHOST else HostKind.SSH

    @property
    def is_local(self) -> bool:
        """Tasks run on this machine (no connection to make, paths are local ones)."""
        return self.launch_kind is HostKind.LOCAL


@dataclass(frozen=True)
class TaskSpec:
    """One ps or worker task. ``port`` is None for ``auto`` (chosen free at launch)."""

    job: Job
    index: int
    host: str
    port: int | None
    gpus: int | None = None

    @property
    def name(self) -> str:
        """``ps0``, ``worker1``: the task's name everywhere in the UI and the run directory."""
        return f"{self.job.value}{self.index}"

    @property
    def is_chief(self) -> bool:
        """Worker 0, the chief when the cluster has no ``chief`` job (see
        :attr:`ClusterConfig.chief`, which knows the whole cluster)."""
        return (self.job is Job.WORKER and self.index == 0) or self.job is Job.CHIEF


class ConfigError(Exception):
    """A mistake in hosts.yaml, located as precisely as possible (``line`` and ``column``
    are 1-based; None when the mistake has no place in the file, e.g. a missing file)."""

    def __init__(self, path: str, line: int | None, column: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        super().__init__(path, line, column, message)

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


class RestartMode(str, Enum):
    """What to do when a task exits with an error."""

    NEVER = "never"
    ON_FAILURE = "on-failure"


@dataclass(frozen=True)
class RestartPolicy:
    """Whether and how often a failed task is started again; ``backoff`` is in seconds."""

    policy: RestartMode = RestartMode.NEVER
    max_restarts: int = 3
    backoff: float = 1.0


@dataclass(frozen=True)
class ClusterConfig:
    """A validated hosts.yaml."""

    path: Path
    hosts: Mapping[str, HostSpec]
    tasks: tuple[TaskSpec, ...]
    training: TrainingSettings
    #: Where runs are recorded. :func:`load_config` always makes it absolute (relative paths
    #: are taken from the hosts.yaml's directory); the default only serves hand-built configs.
    run_dir: Path = Path("runs")
    restart: RestartPolicy = RestartPolicy()
    restart_overrides: Mapping[Job, RestartPolicy] = field(default_factory=dict)
    #: The user's own program (``program:``); None runs the built-in trainer.
    program: ProgramSpec | None = None

    @property
    def ps_tasks(self) -> tuple[TaskSpec, ...]:
        return self.of_job(Job.PS)

    @property
    def worker_tasks(self) -> tuple[TaskSpec, ...]:
        return self.of_job(Job.WORKER)

    def of_job(self, job: Job) -> tuple[TaskSpec, ...]:
        return tuple(t for t in self.tasks if t.job is job)

    @property
    def chief(self) -> TaskSpec:
        """The task that initialises the model: the ``chief`` task, else worker 0."""
        return next((t for t in self.tasks if t.job is Job.CHIEF), None) or self.worker_tasks[0]

    def host_of(self, task: TaskSpec) -> HostSpec:
        return self.hosts.get(task.host) or HostSpec(name=task.host, address=task.host)

    def restart_policy(self, job: Job) -> RestartPolicy:
        """The restart policy for ``job``'s tasks: its override, else the cluster-wide one."""
        return self.restart_overrides.get(job, self.restart)


def load_config(path: str | Path) -> ClusterConfig:
    """Read and validate a hosts.yaml. Raises :class:`ConfigError`, never anything else."""
    label = str(path)
    file = Path(path)
    text = _read_text(file, label)
    root = _compose(text, label)
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
            raise _command_line_error(f"unknown setting {flag}{_did_you_mean(name, FIELD_NAMES)}")
        try:
            converted[name] = convert(name, raw)
        except ValueError as exc:
            raise _command_line_error(f"{flag}: {exc}") from None
    training = dataclasses.replace(config.training, **converted)
    for name, problem in training.problems(len(config.worker_tasks)):
        raise _command_line_error(f"--{name.replace('_', '-')}: {problem}")
    return dataclasses.replace(config, training=training)


def with_restart_mode(config: ClusterConfig, mode: RestartMode) -> ClusterConfig:
    """``--restart MODE``: the policy of every job becomes ``mode``; the counts and backoff
    written in hosts.yaml are kept."""
    return dataclasses.replace(
        config, restart=dataclasses.replace(config.restart, policy=mode),
        restart_overrides={job: dataclasses.replace(p, policy=mode)
                           for job, p in config.restart_overrides.items()})


def _command_line_error(message: str) -> ConfigError:
    return ConfigError("command line", None, None, message)


# --- Reading the file --------------------------------------------------------------------

#: Line breaks as YAML 1.1 (and so PyYAML's marks) counts them.
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_BREAK_CHARS = "\n\r\x85\u2028\u2029"


def _read_text(file: Path, label: str) -> str:
    """The file's text, or a ConfigError saying why it cannot be had."""
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(label, None, None, "file does not exist") from None
    except IsADirectoryError:
        raise ConfigError(label, None, None, "is a directory, expected a hosts.yaml file") from None
    except PermissionError:
        raise ConfigError(label, None, None, "cannot be read: permission denied") from None
    except OSError as exc:
        raise ConfigError(label, None, None, f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a path with a NUL character in it
        raise ConfigError(label, None, None, f"cannot be read: {exc}") from None
    if b"\0" in data:
        # NUL never occurs in YAML text; this is an image, an archive, UTF-16, ...
        raise ConfigError(label, None, None, "is not a text file (it contains NUL bytes); expected YAML")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[line_start:exc.start].decode("utf-8", "replace")) + 1
        raise ConfigError(label, line, column,
                          f"is not UTF-8 text (byte 0x{data[exc.start]:02x}); expected YAML") from None


def _compose(text: str, label: str) -> Node | None:
    """The YAML node tree (None for a file with no content), or a located ConfigError."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, label) from None
    except yaml.reader.ReaderError as exc:
        line, column = _line_column(text, exc.position)
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise ConfigError(label, line, column,
                          f"character U+{ord(char):04X} is not allowed in YAML; is this a text file?"
                          ) from None
    except yaml.YAMLError as exc:  # no other kinds exist today; be safe if one appears
        raise ConfigError(label, None, None, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(label, None, None, "invalid YAML: nested too deeply") from None


def _syntax_error(exc: yaml.MarkedYAMLError, label: str) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    if mark is not None and _char_at(mark) == "\t":
        if _in_indentation(mark):
            return ConfigError(label, line, column, "tab in indentation; indent with spaces only")
        return ConfigError(label, line, column, "tab character; YAML allows only spaces between items")
    message = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
    if exc.problem and exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark is not mark:
            message += f" at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
        message += ")"
    return ConfigError(label, line, column, message)


def _char_at(mark: yaml.Mark) -> str | None:
    if mark.buffer is None or mark.pointer >= len(mark.buffer):
        return None
    return mark.buffer[mark.pointer]


def _in_indentation(mark: yaml.Mark) -> bool:
    """Whether only spaces and tabs precede ``mark`` on its line."""
    buffer = mark.buffer or ""
    i = mark.pointer - 1
    while i >= 0 and buffer[i] not in _BREAK_CHARS:
        if buffer[i] not in " \t":
            return False
        i -= 1
    return True


def _line_column(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of ``text[index]``, counting line breaks as YAML does."""
    line, line_start = 1, 0
    for match in _LINE_BREAK.finditer(text, 0, index):
        line, line_start = line + 1, match.end()
    return line, index - line_start + 1


# --- Walking the node tree ----------------------------------------------------------------

_TAG = "tag:yaml.org,2002:"
_NULL, _BOOL, _INT, _FLOAT, _STR = (_TAG + t for t in ("null", "bool", "int", "float", "str"))
_TIMESTAMP, _MAP, _SEQ, _MERGE = (_TAG + t for t in ("timestamp", "map", "seq", "merge"))
#: Scalar tags that carry text we understand. ``timestamp`` is read as its text: no setting is
#: a date, and a bare date-like word is better taken literally than refused.
_SCALAR_TAGS = frozenset({_NULL, _BOOL, _INT, _FLOAT, _STR, _TIMESTAMP})
_CONSTRUCTOR = SafeConstructor()

_TOP_KEYS = ("hosts", "cluster", "training", "run_dir", "restart", "program")
_HOST_KEYS = ("address", "port", "user", "identity", "known_hosts", "jump", "python", "workdir", "env",
              "kind")
_HOST_TEXT_KEYS = ("address", "user", "identity", "known_hosts", "jump", "python", "workdir")
_JOB_KEYS = tuple(job.value for job in Job)
#: Jobs only a user's program can have.
_PROGRAM_JOBS = frozenset({Job.CHIEF, Job.EVALUATOR})
_TASK_KEYS = ("host", "port", "gpus")
_POLICY_KEYS = ("policy", "max_restarts", "backoff")
_RESTART_KEYS = _POLICY_KEYS + _JOB_KEYS
_POLICY_EXPECTED = "a mapping of policy:, max_restarts:, backoff:"
_DEFAULT_RUN_DIR = "runs"
#: When a training problem concerns a setting absent from the file, point at a related one.
_RELATED_SETTING = {"batch_size": "gpus"}

_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Addresses that all mean "this machine", so tasks on them share one set of ports.
_LOOPBACK = frozenset({LOCALHOST, "127.0.0.1", "::1"})


class _Item(NamedTuple):
    """One ``key: value`` pair of a mapping, both with their positions."""

    key: ScalarNode
    value: Node


class _Loader:
    """Walks one hosts.yaml node tree against the schema, raising located ConfigErrors."""

    def __init__(self, label: str, base_dir: Path) -> None:
        self.label = label
        self.base_dir = base_dir

    # -- errors and plain values --

    def error(self, node: Node, message: str) -> ConfigError:
        mark = node.start_mark
        return ConfigError(self.label, mark.line + 1, mark.column + 1, message)

    def mapping(self, node: Node, where: str, expected: str = "a mapping") -> dict[str, _Item]:
        """A mapping's items by key. ``null`` (a key with nothing under it) is an empty
        mapping. Merge keys (``<<: *anchor``) are honoured; repeated keys are an error."""
        if _is_null(node):
            return {}
        if not isinstance(node, MappingNode) or node.tag != _MAP:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return self._items(node, where, frozenset())

    def _items(self, node: MappingNode, where: str, seen: frozenset[int]) -> dict[str, _Item]:
        explicit: dict[str, _Item] = {}
        merged: dict[str, _Item] = {}
        seen = seen | {id(node)}  # an anchor can merge itself; don't loop forever
        for key, value in node.value:
            if key.tag == _MERGE:
                for source in self._merge_sources(value, where):
                    if id(source) not in seen:
                        for name, item in self._items(source, where, seen).items():
                            merged.setdefault(name, item)
                continue
            name = self.key_name(key, where)
            if name in explicit:
                first = explicit[name].key.start_mark
                raise self.error(key, f"duplicate key {name!r} in {where} "
                                      f"(first at line {first.line + 1}, column {first.column + 1})")
            explicit[name] = _Item(key, value)
        return {**merged, **explicit}  # keys written out win over merged ones, as in YAML

    def _merge_sources(self, node: Node, where: str) -> list[MappingNode]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self.error(source, f"{where}: '<<' merges a mapping, got {self.describe(source)}")
        return list(sources)

    def key_name(self, key: Node, where: str) -> str:
        if not isinstance(key, ScalarNode) or key.tag not in _SCALAR_TAGS - {_NULL} or key.value == "":
            raise self.error(key, f"{where}: expected a name as key, got {self.describe(key)}")
        return str(key.value)  # raw text: a key "on" or "1" is a name, not a boolean or number

    def check_keys(self, items: Mapping[str, _Item], allowed: Iterable[str], where: str) -> None:
        allowed = tuple(allowed)
        for name, item in items.items():
            if name not in allowed:
                raise self.error(item.key, f"unknown key {name!r} in {where}"
                                           f"{_did_you_mean(name, allowed, '; expected one of: ')}")

    def sequence(self, node: Node, where: str, expected: str) -> list[Node]:
        if _is_null(node):
            return []
        if not isinstance(node, SequenceNode) or node.tag != _SEQ:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return list(node.value)

    def scalar(self, node: Node, where: str, expected: str) -> ScalarNode:
        if not isinstance(node, ScalarNode):
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        if node.tag not in _SCALAR_TAGS:
            tag = _short_tag(node.tag)
            raise self.error(node, f"{where}: unsupported YAML tag {tag!r}; expected {expected}")
        return node

    def typed(self, node: ScalarNode, where: str) -> object:
        """The scalar's YAML 1.1 value: None, bool, int, float or str."""
        try:
            if node.tag == _NULL:
                return None
            if node.tag == _BOOL:
                return SafeConstructor.bool_values[node.value.lower()]
            if node.tag == _INT:
                return _CONSTRUCTOR.construct_yaml_int(node)
            if node.tag == _FLOAT:
                return _CONSTRUCTOR.construct_yaml_float(node)
        except (ValueError, KeyError):  # an explicit tag on a bad value, e.g. "!!int ten"
            raise self.error(node, f"{where}: {node.value!r} is not a valid {_short_tag(node.tag)}") from None
        return str(node.value)

    def text(self, node: Node, where: str) -> str:
        """A non-empty string. Numbers and booleans are taken as written (``user: 1001``)."""
        scalar = self.scalar(node, where, "text")
        if scalar.tag == _NULL or not scalar.value.strip():
            raise self.error(node, f"{where}: expected text, got {self.describe(node)}")
        self.check_no_nul(scalar, where)
        return str(scalar.value)

    def integer(self, node: Node, where: str, minimum: int) -> int:
        expected = f"a whole number >= {minimum}"
        value = self.typed(self.scalar(node, where, expected), where)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return value

    def number(self, node: Node, where: str, minimum: float) -> float:
        expected = f"a number >= {minimum:g}"
        value = self.typed(self.scalar(node, where, expected), where)
        # Rejects .nan (fails >=) and .inf too: an endless wait is never what was meant.
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not minimum <= value < math.inf:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return float(value)

    def port(self, node: Node, where: str, allow_auto: bool) -> int | None:
        value = self.typed(self.scalar(node, where, _port_expectation(allow_auto)), where)
        try:
            return _parse_port(value, allow_auto)
        except ValueError as exc:
            raise self.error(node, f"{where}: {exc}{_bool_hint(node)}") from None

    def choice(self, node: Node, where: str, enum: type[_E]) -> _E:
        """One of ``enum``'s values, written as its text."""
        allowed = tuple(member.value for member in enum)
        value = self.typed(self.scalar(node, where, " or ".join(allowed)), where)
        if value not in allowed:
            hint = _did_you_mean(value, allowed) if isinstance(value, str) else ""
            raise self.error(node, f"{where}: expected one of {', '.join(allowed)}, "
                                   f"got {self.describe(node)}{hint}")
        return enum(value)

    def check_no_nul(self, node: ScalarNode, where: str) -> None:
        # YAML can spell NUL ("\0" in double quotes), but no path, command or variable can hold it.
        if "\0" in node.value:
            raise self.error(node, f"{where}: must not contain a NUL character (\\0)")

    def describe(self, node: Node) -> str:
        """How a value reads in a message: ``a list``, ``'fast'``, ``nothing``."""
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        if _is_null(node):
            return "nothing"
        return f"{node.value!r}{_bool_hint(node)}"

    # -- sections --

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
        num_workers = len([t for t in tasks if t.job is Job.WORKER])
        program: ProgramSpec | None = None
        if "program" in top:
            # The user's program reads its own section and takes training: as free-form values.
            training, program = program_section.load(self, top["program"], top.get("training"))
        else:
            training = self.training(top.get("training"), root, num_workers)
        restart, overrides = self.restart(top["restart"].value) if "restart" in top else (RestartPolicy(), {})
        run_dir = self.run_dir(top["run_dir"].value) if "run_dir" in top \
            else (self.base_dir / _DEFAULT_RUN_DIR).resolve()
        return ClusterConfig(path=path, hosts=hosts, tasks=tasks, training=training,
                             run_dir=run_dir, restart=restart, restart_overrides=overrides,
                             program=program)

    def hosts(self, node: Node) -> dict[str, HostSpec]:
        items = self.mapping(node, "hosts", "a mapping of host names to how to reach them")
        hosts: dict[str, HostSpec] = {}
        jumps: dict[str, Node] = {}
        for name, item in items.items():
            if not _HOST_NAME.fullmatch(name):
                raise self.error(item.key, f"hosts: {name!r} is not a valid host name "
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
        self.check_keys(items, _HOST_KEYS, where)
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
        spec = HostSpec(**fields)  # type: ignore[arg-type]  # keys and types checked above
        return spec, items["jump"].value if "jump" in items else None

    def check_address(self, address: str, node: Node, where: str) -> None:
        if not _valid_host(address):
            raise self.error(node, f"{where}: {address!r} is not a host name or IP address")

    def env(self, node: Node, where: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for name, item in self.mapping(node, where, "a mapping of variable names to values").items():
            if not _ENV_NAME.fullmatch(name):
                raise self.error(item.key, f"{where}: {name!r} is not a valid environment variable name")
            value = self.scalar(item.value, f"{where}.{name}", 'a single value (text or a number)')
            if value.tag == _NULL:
                raise self.error(item.value, f'{where}.{name}: expected a value; write "" for an empty one')
            self.check_no_nul(value, f"{where}.{name}")
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
            if not _valid_host(host.strip("[]")):
                raise self.error(node, f"{where}: expected a hosts entry or [user@]host[:port], got {hop!r}")
            if port:
                try:
                    _parse_port(port, allow_auto=False)
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

    def cluster(self, item: _Item, hosts: Mapping[str, HostSpec],
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
        return tuple(task for task, _ in placed)

    def job_entries(self, job: Job, items: Mapping[str, _Item], cluster: _Item,
                    optional: bool = False) -> list[Node]:
        """The task nodes of one job; at least one is required unless ``optional``."""
        example = f"e.g. {job.value}: [localhost:auto]"
        item = items.get(job.value)
        entries = self.sequence(item.value, f"cluster.{job.value}", f"a list of host:port tasks, {example}") \
            if item else []
        if not entries and not optional:
            # Point at the empty list if there is one, else at the key or section lacking it.
            at = _present(item) if item else _present(cluster)
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
            host_node = items["host"].value
        else:
            text = self.text(node, where)
            try:
                host, port_text = _split_host_port(text)
                port = _parse_port(port_text, allow_auto=True)
            except ValueError as exc:
                raise self.error(node, f"{where}: {exc}") from None
            gpus, host_node = None, node
        if not _valid_host(host):
            hint = "; put the user in a hosts: entry" if "@" in host else ""
            raise self.error(host_node, f"{where}: {host!r} is not a host name or IP address{hint}")
        return TaskSpec(job=job, index=index, host=host, port=port, gpus=gpus)

    def check_unique_ports(self, placed: list[tuple[TaskSpec, Node]], hosts: Mapping[str, HostSpec]) -> None:
        """Two tasks cannot listen on one machine's port. Machines are compared by address, so
        ``localhost`` and ``127.0.0.1``, or an entry and its address, are the same machine."""
        taken: dict[tuple[str, int], tuple[TaskSpec, Node]] = {}
        for task, node in placed:
            if task.port is None:
                continue  # auto ports are picked free at launch
            spec = hosts.get(task.host)
            address = (spec.address if spec else task.host).lower()
            key = (LOCALHOST if address in _LOOPBACK else address, task.port)
            if key in taken:
                other, other_node = taken[key]
                mark = other_node.start_mark
                raise self.error(node, f"{task.name} uses {task.host}:{task.port}, already taken by "
                                       f"{other.name} at line {mark.line + 1}, column {mark.column + 1}")
            taken[key] = (task, node)

    def training(self, item: _Item | None, root: Node, num_workers: int) -> TrainingSettings:
        items = self.mapping(item.value, "training", "a mapping of training settings") if item else {}
        self.check_keys(items, FIELD_NAMES, "training")
        values: dict[str, Any] = {name: self.setting(name, entry.value) for name, entry in items.items()}
        settings = dataclasses.replace(TrainingSettings(), **values)
        for name, problem in settings.problems(num_workers):
            raise self.error(_problem_node(name, items, item, root), f"training.{name}: {problem}")
        return settings

    def setting(self, name: str, node: Node) -> object:
        """One training setting, converted by trainer.settings so flags and file agree."""
        where = f"training.{name}"
        scalar = self.scalar(node, where, "a single value")
        default = getattr(TrainingSettings(), name)
        if scalar.tag == _NULL:
            if default is None:
                return None
            raise self.error(node, f"{where}: expected a value, got nothing; remove the key to use "
                                   f"the default ({getattr(default, 'value', default)})")
        # Text settings take the text as written; others take the YAML value, so that an
        # unquoted "on" is reported as the boolean YAML made of it.
        self.check_no_nul(scalar, where)
        raw = scalar.value if FIELD_TYPES[name] is str else self.typed(scalar, where)
        try:
            return convert(name, raw)
        except ValueError as exc:
            allowed = choices(name)
            hint = _did_you_mean(raw, allowed) if allowed and isinstance(raw, str) else ""
            raise self.error(node, f"{where}: {exc}{hint}{_bool_hint(scalar)}") from None

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

    def policy(self, items: Mapping[str, _Item], base: RestartPolicy, where: str) -> RestartPolicy:
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
        return policy

    def run_dir(self, node: Node) -> Path:
        """The run directory, absolute; a relative one is taken from the file's directory."""
        run_dir = self.base_dir / Path(self.text(node, "run_dir")).expanduser()  # "/" keeps absolute
        try:
            return run_dir.resolve()
        except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
            raise self.error(node, f"run_dir: cannot be used: {exc}") from None


# --- Small pure helpers -------------------------------------------------------------------


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL


def _present(item: _Item) -> Node:
    """Where to point about an item's value: the value, or its key when the value is empty
    (an empty value's mark lies after the colon, often at the end of the line)."""
    return item.key if _is_null(item.value) else item.value


def _problem_node(name: str, items: Mapping[str, _Item], training: _Item | None, root: Node) -> Node:
    """Where to point about a problem with setting ``name``: its value, else a related
    setting's value, else the training: key, else the whole file (all settings defaulted)."""
    for candidate in (name, _RELATED_SETTING.get(name, name)):
        if candidate in items:
            return items[candidate].value
    return training.key if training else root


def _short_tag(tag: str) -> str:
    """``tag:yaml.org,2002:int`` -> ``!!int``, as it is written in YAML."""
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


def _bool_hint(node: Node) -> str:
    if isinstance(node, ScalarNode) and node.tag == _BOOL:
        # YAML 1.1 reads unquoted yes/no/on/off/true/false as booleans; say so, since the
        # person wrote a word, not a boolean.
        return f" (YAML reads an unquoted {node.value} as a boolean; quote it if you meant the text)"
    return ""


def _did_you_mean(word: str, allowed: Iterable[str], otherwise: str = "") -> str:
    """``; did you mean 'steps'?`` for the closest allowed word, else ``otherwise`` + all."""
    allowed = tuple(allowed)
    close = difflib.get_close_matches(word, allowed, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"{otherwise}{', '.join(allowed)}" if otherwise else ""


def _port_expectation(allow_auto: bool) -> str:
    return "a port number from 1 to 65535" + (" or auto" if allow_auto else "")


def _parse_port(value: object, allow_auto: bool) -> int | None:
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
        raise ValueError(f"expected {expected}, got {value!r}")
    if not 1 <= number <= 65535:
        raise ValueError(f"port {number} is out of range; expected {expected}")
    return number


def _split_host_port(text: str) -> tuple[str, str]:
    """``host:port`` or ``[ipv6]:port`` -> (host, port text)."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or text[end + 1:end + 2] != ":":
            raise ValueError(f"expected [address]:port, e.g. [::1]:2222, got {text!r}")
        return text[1:end], text[end + 2:]
    host, colon, port = text.rpartition(":")
    if not colon or not host:
        raise ValueError(f"expected host:port or host:auto, e.g. localhost:2222, got {text!r}")
    if ":" in host:
        raise ValueError(f"an IPv6 address needs brackets, e.g. [::1]:2222, got {text!r}")
    return host, port


def _valid_host(host: str) -> bool:
    """A host name (or ssh alias), an IPv4 address or an IPv6 address without brackets."""
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    return bool(_HOST_NAME.fullmatch(host))
