"""The Textual front end. Imported lazily by :mod:`tui.cli`: the core never needs Textual."""

from tui.app.app import TfdistApp, run

__all__ = ["TfdistApp", "run"]
