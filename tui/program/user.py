"""The user's own program (``program:`` in hosts.yaml) as a
:class:`~tui.program.base.TaskProgram`: the command with its placeholders rendered per task,
run in hosts.yaml's folder (remotely: in the uploaded copy of ``upload:``), a Python script
under the shim (``python -m trainer.shim``) unless ``shim: false``, never held. Ready by the
shim's ``ready`` event, TensorFlow's "Started server" line or its port; a ps ends by ``end``
on stdin under the shim, else the controller stops it. Output: protocol events (the shim's
and ``tfdist_report``'s), else metrics read from the log text."""

from __future__ import annotations

import dataclasses
import functools
import posixpath
import re
from collections.abc import Container, Sequence

from trainer import protocol
from trainer.settings import Mode, TrainingSettings
from trainer.shim import BOOTSTRAP
from tui.config.cluster import Job, TaskSpec
from tui.config.program import is_python, module_index, runs_python, script_index
from tui.config.program_source import pss_spot
from tui.config.program_spec import (
    FUSE_PLACEHOLDERS,
    MODE_PLACEHOLDERS,
    PARTITION_PLACEHOLDERS,
    ProgramSpec,
)
from tui.launch.package import upload_package
from tui.program.base import (
    OutputReader,
    PsEnding,
    Readiness,
    Setting,
    TaskCommand,
    TaskContext,
    TaskProgram,
)
from tui.program.hostkind import CHECKPOINTS, SUMMARIES
from tui.program.metrics import LogMetrics
from tui.program.noise import NoiseFolder

#: ``python -c BOOTSTRAP script.py args`` (or ``... -m module args``): the shim runs the
#: program as ``__main__``; see :data:`trainer.shim.BOOTSTRAP` for why not ``-m trainer.shim``.
SHIM_ARGV: tuple[str, ...] = ("-c", BOOTSTRAP)
#: Set for a task under the shim.
SHIM_ENV = "TFDIST_SHIM"
#: Where ``tfdist_report`` lives, relative to the trainer's root (the shim's ``REPORT_DIR``);
#: on a remote host the shim puts it on ``sys.path`` itself.
REPORT_PATH = "trainer/shim/userlib"
#: ``... Started server with target: grpc://localhost:2222``
_PLACEHOLDERS_OF = {Setting.MODE: MODE_PLACEHOLDERS, Setting.PARTITIONS: PARTITION_PLACEHOLDERS,
                    Setting.FUSE: FUSE_PLACEHOLDERS}
_STARTED = re.compile(re.escape(protocol.SERVER_STARTED) + r":?\s*(?:grpc://)?(?P<address>\S+)")


class UserProgram(TaskProgram):
    """Runs :class:`~tui.config.program_spec.ProgramSpec`'s command on every task."""

    holds = False
    readiness = Readiness.SERVER
    reads_stderr = True
    ends_left_behind = True

    def __init__(self, spec: ProgramSpec, workers: int = 1) -> None:
        self.spec = spec
        self.workers = workers  # tasks that train: workers and the chief
        self.ps_ending = PsEnding.END_LINE if self.uses_shim else PsEnding.STOP
        self.warm_mode = "shim" if self.uses_shim else None
        # Without the shim nothing of ours imports TensorFlow: the program may not use it.
        self.checks_tensorflow = self.uses_shim

    @property
    def name(self) -> str:
        return self.spec.written

    @functools.cached_property
    def constructs_pss(self) -> bool:
        """The program (its entry file or a module of its own) constructs TF2's
        ParameterServerStrategy: its chief is the coordinator, whose steps are the whole
        cluster's. The shim says so at run time; without it (``shim: false``) the source is all
        there is to go by."""
        return pss_spot(self.spec) is not None

    @property
    def coordinates_workers(self) -> bool:  # type: ignore[override]
        return self.constructs_pss

    @property
    def uses_shim(self) -> bool:
        """The command runs a Python script or ``-m module``, and the shim is not turned off."""
        return self.spec.shim and _shim_at(self.spec.command) is not None

    def command(self, ctx: TaskContext) -> TaskCommand:
        folder = self._folder(ctx)
        values = placeholder_values(ctx, from_subfolder=folder is not None and not ctx.kind.local_files)
        argv = [arg.format_map(values) for arg in self.spec.command]
        env = {name: value.format_map(values) for name, value in self.spec.env.items()}
        python_path: tuple[str, ...] = ()
        if runs_python(argv[0]):
            index = _shim_at(tuple(argv)) if self.spec.shim else None
            if is_python(argv[0]):  # the host's; a path is run as given
                argv[0] = ctx.python
            if index is not None:
                argv[index:index] = SHIM_ARGV
                env[SHIM_ENV] = "1"
                python_path = (REPORT_PATH,)
        cwd = str(self.spec.base_dir) if ctx.kind.local_files else ctx.kind.cwd(ctx.host, folder)
        return TaskCommand(argv=tuple(argv), env=env, cwd=cwd, python_path=python_path)

    def _folder(self, ctx: TaskContext) -> str | None:
        """The uploaded folder's name on a remote host (None: no upload)."""
        if self.spec.upload is None or ctx.kind.local_files:
            return None
        return upload_package(self.spec.upload, exclude=(ctx.config.run_dir,)).dirname

    def target(self, settings: TrainingSettings) -> int:
        return settings.steps if "steps" in self.spec.placeholders else 0

    def progress_target(self, settings: TrainingSettings) -> int:
        return self.target(settings)

    def describe(self, settings: TrainingSettings) -> str:
        """The command, and only the settings it is given (the built-in trainer's model,
        dataset and placement are not this program's)."""
        known = [f"{settings.steps} steps"] if self.target(settings) else []
        if self.honours(Setting.MODE):
            known.append(settings.mode.value)
        if self.honours(Setting.PARTITIONS):
            known.append(f"{settings.partitions} partition(s)")
        return f"running {self.name}" + (f" ({', '.join(known)})" if known else "")

    def reader(self, spec: TaskSpec, settings: TrainingSettings | None = None) -> OutputReader:
        batch = float(self.spec.batch_size) if self.spec.batch_size else None
        # Without the shim nothing says at run time that the chief coordinates: its lines
        # count the cluster's steps, each the whole batch (never a worker's share of it).
        coordinator = spec.job is Job.CHIEF and not self.uses_shim and self.constructs_pss
        share = batch if coordinator else self.examples_per_step(settings or TrainingSettings())
        metrics = LogMetrics(spec.job.value, spec.index, patterns=self.spec.metrics,
                             examples_per_step=share, evaluates=spec.job is Job.EVALUATOR)
        return ProgramReader(spec, metrics, share, shimmed=self.uses_shim, batch=batch,
                             coordinator=coordinator)

    def examples_per_step(self, settings: TrainingSettings) -> float | None:
        """Examples one task contributes per global step, to turn the global step's rate
        (what the shim reads and most logs show, the same on every worker of a TF1 cluster)
        into this task's examples/sec: a sync step takes a batch from every worker, an async
        step one worker's batch. (TF2's coordinator counts the whole cluster's steps alone:
        :class:`ProgramReader` gives it the whole batch once it says it is one.)"""
        if not self.spec.batch_size:
            return None
        if settings.mode is Mode.SYNC:
            return float(self.spec.batch_size)
        return self.spec.batch_size / max(1, self.workers)

    def honours(self, setting: Setting) -> bool:
        return setting in _PLACEHOLDERS_OF and self.spec.uses_any(_PLACEHOLDERS_OF[setting])

    def ignores(self, setting: Setting) -> str | None:
        if self.honours(setting):
            return None
        if setting not in _PLACEHOLDERS_OF:
            return f"{setting.value} is the built-in trainer's setting; your program decides its own"
        names = sorted(f"{{{name}}}" for name in _PLACEHOLDERS_OF[setting])
        used = f"neither {' nor '.join(names)}" if len(names) > 1 else f"no {names[0]}"
        return f"the program's command uses {used}, so changing {setting.value} changes nothing"


def _shim_at(argv: tuple[str, ...]) -> int | None:
    """Where the shim goes in a Python command: before the ``.py`` script, or in place of
    the ``-m`` (the shim takes ``-m module`` itself); None when there is neither."""
    if not argv or not runs_python(argv[0]):
        return None
    index = script_index(argv)
    if index is not None:
        return index if argv[index].endswith(".py") else None
    module = module_index(argv)
    return module - 1 if module is not None else None


class ProgramReader(OutputReader):
    """Protocol events (the shim's, ``tfdist_report``'s) as they are; TensorFlow's "Started
    server" line as ``ready``; anything else through :class:`LogMetrics`.

    One step unit per task: once the shim reports the task's steps, the steps its log lines
    count (a Keras bar's batches, the same unit) carry the shim's rate rather than one of
    their own, so that two clocks never alternate in a chart. TF2's coordinator (the shim
    says so) counts the whole cluster's steps: its examples per step are the whole batch
    (``batch``), never a worker's share; without the shim (``coordinator``) its lines are
    the coordinator's from the start."""

    def __init__(self, spec: TaskSpec, metrics: LogMetrics, examples_per_step: float | None = None,
                 *, shimmed: bool = False, batch: float | None = None, coordinator: bool = False) -> None:
        self._spec = spec
        self._metrics = metrics
        self._share = examples_per_step
        self._batch = batch
        self._coordinator = coordinator
        self._shim_step: protocol.Step | None = None  # the latest step event of the shim's
        # Under the shim its ready event (with the pid and TensorFlow's version) says it:
        # TensorFlow's own line is then only text, or the task would be ready twice.
        self._ready = shimmed
        self._noise = NoiseFolder()
        # An event ("{"), TensorFlow's server line, or what the log metrics look for.
        self.clues = ("{", protocol.SERVER_STARTED, *metrics.clues) if metrics.clues else ()

    def noise_in(self, lines: Sequence[str], joined: str, skip: Container[int] = ()) -> frozenset[int]:
        return self._noise.noise_in(lines, joined, skip)

    def read(self, line: str, now: float) -> list[protocol.Event]:
        event = protocol.parse_event(line)
        if event is not None:
            return [self._protocol(event)]
        if protocol.SERVER_STARTED in line:
            if self._ready:
                return []
            self._ready = True
            match = _STARTED.search(line)
            return [protocol.Ready(role=self._spec.job.value, index=self._spec.index, t=now, pid=0,
                                   address=match["address"] if match else "")]
        return [self._from_log(e) for e in self._metrics.read(line, now)]

    def _protocol(self, event: protocol.Event) -> protocol.Event:
        if isinstance(event, (protocol.Initialized, protocol.Step)) and event.coordinator:
            self._became_coordinator()
        if isinstance(event, protocol.Step):
            if not event.examples_per_sec and event.step_time > 0 and self._share:
                # The shim measures the global step's pace; the batch size makes it examples.
                event = dataclasses.replace(event, examples_per_sec=self._share / event.step_time)
            self._shim_step = event
        return event

    def _became_coordinator(self) -> None:
        if not self._coordinator:
            self._coordinator = True
            if self._batch:
                self._share = self._metrics.examples_per_step = self._batch

    def _from_log(self, event: protocol.Event) -> protocol.Event:
        shim = self._shim_step
        if not isinstance(event, protocol.Step):
            return event
        if shim is None:
            return dataclasses.replace(event, coordinator=True) if self._coordinator else event
        return dataclasses.replace(event, examples_per_sec=shim.examples_per_sec, step_time=shim.step_time,
                                   coordinator=shim.coordinator)


def placeholder_values(ctx: TaskContext, *, from_subfolder: bool = False) -> dict[str, str]:
    """What each placeholder means for ``ctx``'s task (training: values included)."""
    config, settings = ctx.config, ctx.settings
    run_dir = ctx.kind.run_dir(ctx.run_dir_name, ctx.run_id, from_subfolder=from_subfolder)

    values = dict(config.program.values) if config.program else {}
    values.update({
        "job": ctx.spec.job.value,
        "index": str(ctx.spec.index),
        "ps_hosts": ctx.job_addresses(Job.PS),
        "worker_hosts": ctx.job_addresses(Job.WORKER),
        "chief_hosts": ctx.job_addresses(Job.CHIEF),
        "address": ctx.address(ctx.spec),
        "mode": settings.mode.value,
        "sync": "true" if settings.mode.value == "sync" else "false",
        "partitions": str(settings.partitions),
        "fuse": "true" if settings.fuse else "false",
        "steps": str(settings.steps),
        "run_dir": run_dir,
        "checkpoint_dir": settings.checkpoint_dir or posixpath.join(run_dir, CHECKPOINTS),
        "summary_dir": settings.summary_dir or posixpath.join(run_dir, SUMMARIES),
    })
    return values
