"""The notifications (toasts) the app shows for what an operator must not miss: a task that
failed, a warning or error notice, a run's end. Few at a time: the panes stay readable."""

from __future__ import annotations

import time
from collections import deque

from textual.app import App
from textual.notifications import Notification, Notify, SeverityLevel

from tui.app.markup import said
from tui.core.events import Level, Notice, RunFinished, RunOutcome, TaskStateChanged
from tui.core.exits import ExitInfo
from tui.core.task_state import TaskState

#: How long a notification stays (Textual's default is 5 s; failures used to stay 30 s).
TOAST_SECONDS = 6.0
#: At most this many notifications on screen at once (they cover the panes' right side).
MAX_TOASTS = 3


class Announcements(App[int]):
    """Turns the core's events into toasts, at most :data:`MAX_TOASTS` at once."""

    _toasts_held: int  # notices not toasted because MAX_TOASTS were up
    _toasts_up: deque[tuple[float, str]]  # when each toast on screen goes, and which it is
    _summary_until: float  # when the "more notices" toast goes
    _toasts_about: dict[str, Notification]  # the toast of a notice about something (Notice.about)

    def _init_toasts(self) -> None:
        self._toasts_held = 0
        self._toasts_up = deque()
        self._summary_until = 0.0
        self._toasts_about = {}

    def _announce(self, event: object) -> None:
        """Notifications for what an operator must not miss."""
        if isinstance(event, TaskStateChanged) and event.new is TaskState.FAILED:
            text = f"{event.task} {ExitInfo(event.exit_code, event.reason).detail('failed')}"
            # The table says "failed" and the log says why for as long as it matters: a toast
            # only draws the eye, briefly (long ones stacked up over the table).
            self._toast(text, title="task failed", severity="error")
        elif isinstance(event, Notice) and (event.level is not Level.INFO or self._up(event.about)):
            # A notice about what a toast on screen says replaces it, even at INFO ("host h2
            # answers again"): the warning stayed its full time after its cause was gone.
            self._toast(event.text, severity=_SEVERITIES[event.level], about=event.about)
        # (A hint has its own line under the table until the core takes it back: no toast.)
        elif isinstance(event, RunFinished):
            summary = event.summary
            # A run without a target (a user's program that never said) has none: never
            # "step 500/0" (headless's summary says "steps 500").
            target = f"/{summary.target}" if summary.target else ""
            self.notify(f"run {summary.outcome.value}: step {summary.global_step}{target}"
                        f" in {summary.wall_time:.0f} s",
                        severity="information" if summary.outcome is RunOutcome.SUCCEEDED else "warning")

    def _up(self, about: str) -> bool:
        """Whether a toast about ``about`` is on screen."""
        notification = self._toasts_about.get(about) if about else None
        return notification is not None and not notification.has_expired

    def _toast(self, text: str, *, severity: SeverityLevel, title: str = "", about: str = "") -> None:
        """A notification, unless :data:`MAX_TOASTS` are already up: 48 workers reported
        stalled at once made 48 toasts over the table, and redrawing them starved the keys.
        The rest are counted in one toast; every notice is in the All logs pane. One about
        the same thing as a toast on screen takes that one's place."""
        now = time.monotonic()
        while self._toasts_up and self._toasts_up[0][0] <= now:
            self._toasts_up.popleft()
        before = self._toasts_about.pop(about, None) if about else None
        if before is not None:
            self._toasts_up = deque(up for up in self._toasts_up if up[1] != before.identity)
            # (After the Notify that shows it, which is in the same queue: Textual's own
            # toasts take themselves down with _unnotify too.)
            self.call_later(self._take_down, before)
        if len(self._toasts_up) < MAX_TOASTS:
            # (Counted here: a Notify only posts a message, the toast appears later.)
            notification = Notification(said(text), said(title), severity, TOAST_SECONDS)
            self._toasts_up.append((now + TOAST_SECONDS, notification.identity))
            if about:
                self._toasts_about[about] = notification
            self.post_message(Notify(notification))
            return
        self._toasts_held += 1
        if now >= self._summary_until:  # one such toast at a time
            self._summary_until = now + TOAST_SECONDS
            self.notify("more notices than fit here: the All logs pane has every one",
                        severity="warning", timeout=TOAST_SECONDS)

    def _take_down(self, notification: Notification) -> None:
        # Textual's own way to take one toast down is private (textual>=0.80 is not capped):
        # a release without it leaves the toast to time out, as before, rather than failing.
        take_down = getattr(self, "_unnotify", None)
        if take_down is not None and notification in getattr(self, "_notifications", ()):
            take_down(notification)


_SEVERITIES: dict[Level, SeverityLevel] = {Level.INFO: "information", Level.WARNING: "warning",
                                           Level.ERROR: "error"}
