"""The built-in trainer (``python -m trainer``) as a :class:`~tui.program.base.TaskProgram`:
launched held, ready by its ``ready`` event, ps tasks end by themselves, output is protocol
events only. Its whole contract is documented in :mod:`trainer.protocol`."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import TaskSpec
from tui.program.base import EventReader, OutputReader, Setting, TaskCommand, TaskContext, TaskProgram
from tui.program.hostkind import CHECKPOINTS, SUMMARIES

#: How the trainer is invoked after the interpreter: ``python -m trainer <flags>``.
TRAINER_ARGV: tuple[str, ...] = ("-m", "trainer")


class BuiltinTrainer(TaskProgram):
    """``python -m trainer [--hold] <settings as flags>`` on every task."""

    previews_placement = True

    def __init__(self, *, trainer_argv: Sequence[str] = TRAINER_ARGV, hold: bool = True) -> None:
        self._argv = tuple(trainer_argv)
        self.holds = hold
        self.warm_mode = "trainer" if self._argv == TRAINER_ARGV else None

    @property
    def name(self) -> str:
        return "the built-in trainer"

    def command(self, ctx: TaskContext) -> TaskCommand:
        # gpus: 0 asks for no GPU (tui.plan.allocation hides them); the trainer still builds one tower.
        settings = ctx.settings if ctx.spec.gpus is None else ctx.settings.replace(gpus=max(1, ctx.spec.gpus))
        if settings.checkpoint_dir is None and ctx.run_dir is not None:
            settings = settings.replace(checkpoint_dir=default_checkpoint_dir(ctx))
        if settings.summary_dir is None and ctx.run_dir is not None:
            settings = settings.replace(summary_dir=default_summary_dir(ctx))
        hold = (protocol.HOLD_FLAG,) if self.holds else ()
        return TaskCommand(argv=(ctx.python, *self._argv, *hold, *settings.to_argv()),
                           cwd=ctx.kind.cwd(ctx.host))

    def reader(self, spec: TaskSpec, settings: TrainingSettings | None = None) -> OutputReader:
        return EventReader()

    def honours(self, setting: Setting) -> bool:
        return True


def default_checkpoint_dir(ctx: TaskContext) -> str:
    """Where a run checkpoints when ``checkpoint_dir`` is not set: its run directory on this
    machine, ``runs/<run id>/checkpoints`` under the host's workdir on a remote one. Without
    checkpoints a cluster restart (after a ps failed) would start training over."""
    return posixpath.join(ctx.kind.run_dir(ctx.run_dir_name, ctx.run_id), CHECKPOINTS)


def default_summary_dir(ctx: TaskContext) -> str:
    """Where a run writes TensorBoard event files when ``summary_dir`` is not set: the
    ``tensorboard`` folder of its run directory (so ``tensorboard --logdir runs`` shows every
    run side by side); ``runs/<run id>/tensorboard`` under the workdir on a remote host."""
    return posixpath.join(ctx.kind.run_dir(ctx.run_dir_name, ctx.run_id), SUMMARIES)
