"""NO_COLOR (https://no-color.org) in the app: what it draws is grey, as headless prints no
colour (tui.common.terminal.wants_colour); Textual reads the variable when the app is made."""

from __future__ import annotations

import re

import pytest

from tests.app.scripted import running_history, scripted
from tui.core.options import RunOptions

#: The exported picture's own frame (the window's three buttons, its title text), not the app's.
FRAME = {"ff5f57", "febc2e", "28c840", "c5c8c6"}


async def colours_drawn(options: RunOptions) -> set[str]:
    app, _ = scripted(options, running_history(options.config.training))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        picture = app.export_screenshot()
    found = {c.lower() for c in re.findall(r"#([0-9a-fA-F]{6})\b", picture)}
    return {c for c in found - FRAME if len({c[0:2], c[2:4], c[4:6]}) > 1}  # not grey


async def test_no_color_makes_the_app_grey(options: RunOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert await colours_drawn(options)  # (the task states and borders are coloured)
    monkeypatch.setenv("NO_COLOR", "1")
    assert await colours_drawn(options) == set()
