"""Snapshots of the main states, from a scripted history (layout only; behaviour is tested
against real clusters in test_pilot.py)."""

from __future__ import annotations

import pytest

from tests.app.scripted import T0, ScriptedCore, failed_history, placement, running_history
from tui.app.app import TfdistApp
from tui.app.messages import PreviewReady


def scripted_app(options, events) -> TfdistApp:
    core = ScriptedCore(events)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    # No animations: a busy machine took a picture of the tabs' underline half way to its pane.
    app.animation_level = "none"
    return app


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_running(snap_compare, options, size) -> None:
    app = scripted_app(options, running_history(options.config.training))
    assert snap_compare(app, terminal_size=size)


def test_throughput_pane(snap_compare, options) -> None:
    app = scripted_app(options, running_history(options.config.training))

    async def to_the_pane(pilot) -> None:
        await pilot.press("tab", "tab", "tab")
        # Drawn as the refresh timer would: the picture must not depend on when it fires.
        app.refresh_dashboard(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=to_the_pane)


def test_placement_preview_pending(snap_compare, options) -> None:
    app = scripted_app(options, running_history(options.config.training))

    async def preview(pilot) -> None:
        pending = app.pending.replace(partitions=2, placement="greedy")
        app.pending = pending
        app.post_message(PreviewReady(pending, placement(partitions=2, strategy="greedy")))
        await pilot.press("tab", "tab")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=preview)


def test_failed_task(snap_compare, options) -> None:
    app = scripted_app(options, failed_history(options.config.training))
    assert snap_compare(app, terminal_size=(120, 40), press=["down", "down", "down"])


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_help(snap_compare, options, size) -> None:
    app = scripted_app(options, running_history(options.config.training))
    assert snap_compare(app, terminal_size=size, press=["question_mark"])
