"""The app sends typed commands to the core (checked against a scripted core, no cluster),
and its keys, help screen and palette come from the one declaration in tui.app.controls."""

from __future__ import annotations

from textual.binding import Binding

from tests.app.scripted import T0, ScriptedCore, running_history
from trainer.settings import Mode
from tui.app.app import TfdistApp
from tui.app.controls import CONTROLS, help_text
from tui.app.runs import RunsView
from tui.core.commands import Relaunch, RestartTask, StartTask, StopAll, StopTask
from tui.core.options import RunOptions


async def test_keys_send_typed_commands(options: RunOptions) -> None:
    core = ScriptedCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda _app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down")
        selected = app.table.selected
        assert selected == "worker0"  # (x on a ps asks first: tests/app/test_trust.py)
        await pilot.press("x", "r", "s")
        await pilot.press("X")
        await pilot.press("y")
        await pilot.press("m", "R")
        await pilot.press("y")
        await pilot.pause()
    applied = app.dashboard.settings
    assert core.commands == [StopTask(selected), RestartTask(selected), StartTask(selected), StopAll(),
                             Relaunch(applied.replace(mode=Mode.SYNC if applied.mode is Mode.ASYNC
                                                      else Mode.ASYNC))]


def test_bindings_and_help_are_made_from_the_controls() -> None:
    bindings = {b.key: b.action for b in TfdistApp.BINDINGS if isinstance(b, Binding)}
    assert bindings == {c.key: c.action for c in CONTROLS if c.action is not None and c.pane is None}
    runs = {b.key: b.action for b in RunsView.BINDINGS if isinstance(b, Binding)}
    assert runs == {c.key: c.action for c in CONTROLS if c.pane == "runs"} != {}
    text = help_text()
    for control in CONTROLS:
        assert f"{control.display}  {control.help_line()}" in text
