"""The settings keys of the app (mode, partitions, placement, fuse; pending until ``R``
relaunches), and their placement preview (computed without TensorFlow, as the key is
pressed: tui/plan/preview.py)."""

from __future__ import annotations

from textual import on
from textual.app import App

from trainer import protocol
from trainer.settings import Mode, PlacementStrategy, TrainingSettings
from tui.app.markup import said
from tui.app.messages import PendingSettingsChanged, PreviewFailed, PreviewReady, RelaunchRequested
from tui.app.screens import ConfirmScreen
from tui.app.state import Dashboard
from tui.app.widgets import StatusBar
from tui.core.commands import Command, Relaunch
from tui.core.options import RunOptions
from tui.plan.preview import PreviewError, preview_placement
from tui.program.base import Setting, TaskProgram


def changed_settings(applied: TrainingSettings, pending: TrainingSettings) -> list[str]:
    """``name: old → new`` for each setting that differs."""
    lines = []
    for name in ("mode", "partitions", "placement", "fuse"):
        old, new = getattr(applied, name), getattr(pending, name)
        if old != new:
            lines.append(f"{name}: {getattr(old, 'value', old)} → {getattr(new, 'value', new)}")
    return lines


class SettingsActions(App[int]):
    """The half of :class:`~tui.app.app.TfdistApp` that changes settings: each change is
    pending (marked in the status bar) until the operator relaunches."""

    options: RunOptions
    dashboard: Dashboard
    pending: TrainingSettings
    preview: protocol.Placement | None
    preview_note: str
    #: A placement depends only on the settings (the cluster is fixed): flipping back and
    #: forth computes it once.
    _previews: dict[TrainingSettings, protocol.Placement]

    @property
    def _program(self) -> TaskProgram:
        raise NotImplementedError

    def _request(self, command: Command) -> None:
        raise NotImplementedError

    def _show_placement(self) -> None:
        raise NotImplementedError

    def _set_pending(self, pending: TrainingSettings, preview: bool) -> None:
        self.pending = pending
        self.post_message(PendingSettingsChanged(pending))
        self.query_one(StatusBar).show(self.dashboard, pending)  # now, not at the next tick
        if preview:
            self.preview, self.preview_note = self._previews.get(pending), ""
            if self.preview is None:
                self._compute_preview(pending)
            self._show_placement()

    def _ignored(self, setting: Setting) -> bool:
        """Say so (instead of pretending) when the run's program ignores ``setting``."""
        why = self._program.ignores(setting)
        if why:
            self.notify(why, severity="warning")
        return why is not None

    def action_toggle_mode(self) -> None:
        if self._ignored(Setting.MODE):
            return
        mode = Mode.ASYNC if self.pending.mode is Mode.SYNC else Mode.SYNC
        self._set_pending(self.pending.replace(mode=mode), preview=False)

    def action_partitions(self, delta: int) -> None:
        if self._ignored(Setting.PARTITIONS):
            return
        partitions = self.pending.partitions + delta
        if partitions < 1:
            self.notify("partitions must be at least 1", severity="warning")
            return
        self._set_pending(self.pending.replace(partitions=partitions),
                          preview=self._program.previews_placement)

    def action_toggle_placement(self) -> None:
        if self._ignored(Setting.PLACEMENT):
            return
        placement = (PlacementStrategy.ROUND_ROBIN if self.pending.placement is PlacementStrategy.GREEDY
                     else PlacementStrategy.GREEDY)
        self._set_pending(self.pending.replace(placement=placement), preview=True)

    def action_toggle_fuse(self) -> None:
        if self._ignored(Setting.FUSE):
            return
        # The variables and their ps stay the same: nothing for the placement preview.
        self._set_pending(self.pending.replace(fuse=not self.pending.fuse), preview=False)

    def _compute_preview(self, settings: TrainingSettings) -> None:
        """Microseconds, so on the spot; the message tells whoever listens (tests, logs)."""
        try:
            placement = preview_placement(self.options.config, settings)
        except PreviewError as exc:
            self.preview_note = f"no preview: {exc}"
            self.post_message(PreviewFailed(settings, str(exc)))
            return
        self._previews[settings] = self.preview = placement
        self.post_message(PreviewReady(settings, placement))

    @on(PreviewReady)
    def _preview_ready(self, message: PreviewReady) -> None:
        self._previews[message.settings] = message.placement
        if message.settings != self.pending:
            return  # a newer change is being previewed
        self.preview, self.preview_note = message.placement, ""
        self._show_placement()

    @on(PreviewFailed)
    def _preview_failed(self, message: PreviewFailed) -> None:
        if message.settings == self.pending:
            self.preview, self.preview_note = None, f"no preview: {message.reason}"
            self._show_placement()
        self.notify(said(f"placement preview failed: {message.reason}"), severity="warning")

    def action_relaunch(self) -> None:
        pending = self.pending
        changes = changed_settings(self.dashboard.settings, pending) or ["no setting changed"]
        active = self.dashboard.active_tasks
        details = "\n".join(changes)
        details += (f"\n\n{len(active)} running tasks will be stopped, then the cluster starts again."
                    if active else "\n\nThe cluster starts again.")
        if pending.checkpoint_dir:
            details += f"\nTraining resumes from {pending.checkpoint_dir} where possible."

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.post_message(RelaunchRequested(pending))

        self.push_screen(ConfirmScreen("Relaunch the cluster?", details), confirmed)

    @on(RelaunchRequested)
    def _relaunch(self, message: RelaunchRequested) -> None:
        self.preview, self.preview_note = None, ""
        self._request(Relaunch(message.settings))
