"""Foreign text (a task's, a host's, a run directory's) made safe for a notification."""

from __future__ import annotations

from rich.markup import escape

from tui.common.terminal import inert


def said(text: str) -> str:
    """``text`` inert for the terminal, and its ``[...]`` shown as written rather than read as
    Rich markup (a ``[/]`` in a reason would crash the app)."""
    return escape(inert(text))
