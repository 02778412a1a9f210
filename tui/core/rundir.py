"""The run directory: everything a run did, on disk, for people and for later tools.

Layout of ``<root>/<run-id>/``::

    config.yaml          the resolved config (auto ports chosen, overrides applied)
    controller.lock      locked by the run's controller while it runs (see tui.launch.owner)
    tasks/<task>.json    each task's TF_CONFIG, argv and shell-quoted command line
    logs/<task>.log      every output line of the task, stdout and stderr interleaved
    events.jsonl         every controller event except raw output lines, one JSON a line
    summary.json         how the run ended (written last)

Log lines read ``HH:MM:SS.mmm out | text`` (``err`` for stderr, ``ctl`` for the
controller's own marks such as starts and exits). A line too long for one read is written
in pieces, the continuation pieces marked ``out+``/``err+``; nothing is ever truncated.
Writes go to buffered files; :meth:`RunDirectory.flush_periodically` flushes them on a
timer so a crash loses at most a second, and :meth:`RunDirectory.close` flushes the rest.

The directory is the run's record, so a write that fails (a full disk, a lost mount) is never
silent and never an exception in the caller's path: it is caught where it happens and becomes
one :class:`WriteFailure` naming the file and the OS's reason, handed to ``on_failure`` once
(the supervisor stops the run: a run without its record must not end "succeeded"). Later
writes are still tried (space may come back), and ``summary.json`` is written atomically, so
it is either whole or absent, never empty.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import IO, Any

import yaml

from trainer.settings import TrainingSettings
from tui.common.private import make_private_dir, private_opener, replace_file, write_private
from tui.config import slurm as slurm_settings
from tui.config.cluster import ClusterConfig, Job, RestartPolicy
from tui.config.program import DRIVEN_SETTINGS
from tui.core.clock import Clock
from tui.core.event_records import summary_record, to_json
from tui.core.events import ControllerEvent, RunSummary, TaskOutput, TaskStateChanged
from tui.launch.lines import Stream
from tui.launch.owner import lock_run
from tui.plan.tasks import TaskPlan

FLUSH_INTERVAL = 1.0
#: Each task's log keeps at most this many characters of output (a task printing a flood
#: for days must not fill the disk); then one marker line says so, and only the
#: controller's state marks follow. The summary still has the task's last lines.
MAX_LOG_CHARS = 256 * 1024 * 1024


def new_run_id(now: float) -> str:
    """``20241121-203901-a1b2c3``: sortable by start time, unique thanks to the suffix."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class WriteFailure:
    """A file of the run directory could not be written: which, and the OS's reason."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"

    @classmethod
    def of(cls, path: Path, exc: OSError) -> WriteFailure:
        return cls(path, exc.strerror or str(exc))


class RunDirectory:
    """Writer for one run's directory. Not thread-safe: use it from the event loop.

    Only :meth:`create`, :meth:`write_config` and :meth:`write_task` (before the run starts)
    raise OSError; every later write reports a failure through :attr:`failure` and
    ``on_failure`` instead."""

    def __init__(self, path: Path, max_log_chars: int = MAX_LOG_CHARS) -> None:
        self.path = path
        self.max_log_chars = max_log_chars
        self._log_chars: dict[str, int] = {}  # written so far, per task
        self._capped: set[str] = set()
        #: Each task's open log and its path (made once: a flood writes thousands of lines a second).
        self._logs: dict[str, tuple[Path, IO[str]]] = {}
        self._events: IO[str] | None = None
        self._closed = False
        #: (device, inode) of the directory as made: appends to open files still succeed
        #: after it is deleted, so each flush looks whether it is still there.
        self._identity: tuple[int, int] | None = None
        #: The first write that failed, if any.
        self.failure: WriteFailure | None = None
        #: Called once, with the first failure.
        self.on_failure: Callable[[WriteFailure], None] | None = None
        self._lock: IO[bytes] | None = None

    @classmethod
    def create(cls, root: Path, run_id: str, max_log_chars: int = MAX_LOG_CHARS) -> RunDirectory:
        """Make ``root/run_id`` (and ``root`` if needed). Raises OSError."""
        path = root / run_id
        # Private: tasks/*.json and config.yaml hold the tasks' environments (secrets).
        if not root.exists():
            make_private_dir(root, parents=True, exist_ok=True)
        make_private_dir(path)
        make_private_dir(path / "logs")
        make_private_dir(path / "tasks")
        directory = cls(path, max_log_chars)
        made = path.stat()
        directory._identity = (made.st_dev, made.st_ino)
        # Held until close() (the kernel drops it if we die): the sweep of another
        # controller sees that this run is controlled.
        directory._lock = lock_run(path)
        # Held open for the whole run (buffered appends are cheap); closed by close().
        directory._events = open(directory._events_path, "w", encoding="utf-8",  # noqa: SIM115
                                 opener=private_opener)
        return directory

    def write_config(self, config: ClusterConfig, settings: TrainingSettings,
                     plans: tuple[TaskPlan, ...]) -> None:
        """Write ``config.yaml``: the config as this run used it."""
        header = f"# resolved from {config.path}\n"
        body = yaml.safe_dump(resolved_config(config, settings, plans), sort_keys=False,
                              allow_unicode=True)
        write_private(self.path / "config.yaml", header + body)

    def write_task(self, plan: TaskPlan) -> None:
        """Write ``tasks/<task>.json``: how the task is launched."""
        record = {
            "name": plan.name,
            "job": plan.spec.job.value,
            "index": plan.spec.index,
            "host": plan.spec.host,
            "port": plan.port,
            "tf_config": json.loads(plan.tf_config),
            "argv": list(plan.argv),
            "command": plan.command,
            "shell": plan.shell_command,
            "env": dict(plan.env),
            "cwd": plan.cwd,
            # Its share of the host (tui.plan.allocation); the variables that give it are in env.
            "share": None if plan.share is None else {
                **dataclasses.asdict(plan.share), "text": plan.share.describe()},
        }
        text = json.dumps(record, indent=2) + "\n"
        write_private(self.path / "tasks" / f"{plan.name}.json", text)

    def record(self, event: ControllerEvent) -> None:
        """Write one event where it belongs: output lines to the task's log, everything
        else to ``events.jsonl`` (state changes also as a mark in the task's log)."""
        if self._closed:
            return
        if isinstance(event, TaskOutput):
            if event.task not in self._capped:
                self._output_lines(event.task, _log_text(event), event.t)
            return
        if isinstance(event, TaskStateChanged):
            self._write_log(event.task, f"{_clock(event.t)} ctl | {_describe_state(event)}\n")
        if self._events is not None:
            try:  # (not through _guarded: a call less for every step of every task)
                self._events.write(to_json(event) + "\n")
            except OSError as exc:
                self._failed(WriteFailure.of(self._events_path, exc))

    def write_summary(self, summary: RunSummary) -> None:
        """Write ``summary.json`` atomically: a temporary file, synced, renamed over it."""
        text = json.dumps(summary_record(summary), indent=2) + "\n"
        target = self.path / "summary.json"
        try:
            replace_file(target, text)
        except OSError as exc:
            self._failed(WriteFailure.of(target, exc))

    def flush(self) -> None:
        """Write out what is buffered; a failure is reported, never raised."""
        if self._closed:
            return  # close() flushed; a flusher waking after it has nothing to do
        for path, handle in self._handles():
            self._guarded(path, handle.flush)
        self._check_still_there()

    def _check_still_there(self) -> None:
        if self._identity is None or self.failure is not None:
            return
        try:
            now = self.path.stat()
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self._identity:
            self._failed(WriteFailure(self.path, "the run directory was deleted or replaced during "
                                                 "the run: its logs and events are lost"))

    async def flush_periodically(self, clock: Clock, interval: float = FLUSH_INTERVAL) -> None:
        """Flush every ``interval`` seconds until cancelled."""
        while not self._closed:
            await clock.sleep(interval)
            self.flush()  # never raises: a full disk must not end the flushing for good

    def close(self) -> None:
        """Flush and close every file. Later :meth:`record` calls are ignored."""
        if self._closed:
            return
        self._closed = True
        for path, handle in self._handles():
            # A failed flush still closes the file (io closes the descriptor, then raises).
            self._guarded(path, handle.close)
        if self._lock is not None:
            self._lock.close()  # releases the lock; nothing was buffered

    def _log_path(self, task: str) -> Path:
        return self.path / "logs" / f"{task}.log"

    @functools.cached_property
    def _events_path(self) -> Path:
        # (Once: a Path join per recorded event was a measurable part of a busy run's cost.)
        return self.path / "events.jsonl"

    def _handles(self) -> list[tuple[Path, IO[str]]]:
        handles = list(self._logs.values())
        return handles + ([(self._events_path, self._events)] if self._events else [])

    def _output_lines(self, task: str, text: str, t: float) -> None:
        """Write whole log lines ``text`` unless the task's log is full: then the lines that
        still fit, and the marker."""
        room = self.max_log_chars - self._log_chars.get(task, 0)
        if len(text) <= room:
            self._log_chars[task] = self.max_log_chars - room + len(text)
            self._write_log(task, text)
            return
        fits = text.rfind("\n", 0, room) + 1
        if fits:
            self._write_log(task, text[:fits])
        self._capped.add(task)
        self._write_log(task, f"{_clock(t)} ctl | log capped: {self.max_log_chars:,} characters of output "
                              f"kept, the rest of this task's output is not (its last lines are in "
                              f"summary.json)\n")

    def _write_log(self, task: str, text: str) -> None:
        log = self._logs.get(task)
        if log is None:
            path = self._log_path(task)
            try:
                # Append: a restarted task keeps writing to the same log.
                log = self._logs[task] = (path, open(path, "a", encoding="utf-8",  # noqa: SIM115
                                                     errors="replace", opener=private_opener))
            except OSError as exc:
                self._failed(WriteFailure.of(path, exc))
                return
        try:  # (not through _guarded: a call less for every line)
            log[1].write(text)
        except OSError as exc:
            self._failed(WriteFailure.of(log[0], exc))

    def _guarded(self, path: Path, action: Callable[..., object], *args: object) -> None:
        """``action(*args)``, a write to ``path``, with an OSError turned into a failure."""
        try:
            action(*args)
        except OSError as exc:
            self._failed(WriteFailure.of(path, exc))

    def _failed(self, failure: WriteFailure) -> None:
        if self.failure is not None:
            return  # the first failure says it; the rest are the same full disk
        self.failure = failure
        if self.on_failure is not None:
            self.on_failure(failure)


def _log_text(output: TaskOutput) -> str:
    """The log file's lines for ``output``: each behind the time and its stream's mark (a
    continuation piece's mark with a ``+``), made in one join."""
    mark = "out" if output.stream is Stream.STDOUT else "err"
    head = f"{_clock(output.t)} {mark} | "
    text = head + f"\n{head}".join(output.lines) + "\n"
    if output.continued:
        text = f"{_clock(output.t)} {mark}+ | " + text[len(head):]
    return text


def resolved_config(config: ClusterConfig, settings: TrainingSettings,
                    plans: tuple[TaskPlan, ...]) -> dict[str, Any]:
    """The config in hosts.yaml's own shape, with every port resolved."""
    hosts = {}
    for name, host in config.hosts.items():
        entry = {f.name: _plain(getattr(host, f.name)) for f in dataclasses.fields(host)
                 if f.name not in ("name", "slurm")}
        if host.slurm is not None:  # a Slurm entry has its own keys instead of a machine's
            entry = {k: v for k, v in entry.items() if k not in slurm_settings.NOT_FOR_SLURM}
            entry.update(host.slurm.as_yaml())
        entry["env"] = dict(host.env)
        hosts[name] = {k: v for k, v in entry.items() if v is not None}
    cluster: dict[str, list[Any]] = {}
    for plan in plans:
        address: Any = f"{plan.spec.host}:{plan.port}"
        if plan.spec.gpus is not None:
            address = {"host": plan.spec.host, "port": plan.port, "gpus": plan.spec.gpus}
        cluster.setdefault(plan.spec.job.value, []).append(address)
    training: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if value is not None and (config.program is None or f.name in DRIVEN_SETTINGS):
            training[f.name] = _plain(value)
    jobs = [job for job in Job if job in (Job.PS, Job.WORKER) or config.of_job(job)]
    restart = {job.value: _policy(config.restart_policy(job)) for job in jobs}
    resolved: dict[str, Any] = {"hosts": hosts, "cluster": cluster, "training": training,
                                "run_dir": str(config.run_dir), "restart": restart}
    if config.program is not None:
        program = config.program
        training.update(program.values)
        # Its variable assignments first, as written: loaded again, they are read back as such.
        assigned = [f"{name}={value}" for name, value in program.env.items()]
        resolved["program"] = {"command": [*assigned, *program.command], "shim": program.shim,
                               **({"upload": str(program.upload)} if program.upload else {}),
                               **({"batch_size": program.batch_size} if program.batch_size else {}),
                               **({"metrics": [m.regex.pattern for m in program.metrics]}
                                  if program.metrics else {})}
    return resolved


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _policy(policy: RestartPolicy) -> dict[str, Any]:
    return {"policy": policy.policy.value, "max_restarts": policy.max_restarts,
            "backoff": policy.backoff, "window": policy.window}


def _clock(t: float, _last: list[object] = [None, ""]) -> str:  # noqa: B006 (a one-entry cache)
    # One strftime per second, not per line: a flood writes tens of thousands a second.
    second = int(t)
    if _last[0] != second:
        _last[0], _last[1] = second, time.strftime("%H:%M:%S", time.localtime(second))
    return f"{_last[1]}.{int(t * 1000) % 1000:03d}"


def _describe_state(event: TaskStateChanged) -> str:
    text = f"{event.old.value} -> {event.new.value}"
    if event.pid is not None:
        text += f" (pid {event.pid})"
    if event.exit_code is not None:
        text += f", exit code {event.exit_code}"
    if event.reason:
        text += f": {event.reason}"
    return text

