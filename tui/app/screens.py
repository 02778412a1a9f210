"""Modal screens: confirmation of a disruptive action, and the key help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tui.app.controls import help_text


class ConfirmScreen(ModalScreen[bool]):
    """Ask before acting; says what will change. ``y``/``enter`` confirm, ``n``/``esc`` cancel."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, details: str) -> None:
        super().__init__()
        self.title_text = title
        self.details = details

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.title_text, id="dialog-title")
            yield Static(self.details, id="dialog-details")
            with Horizontal(id="dialog-buttons"):
                yield Button("Yes (y)", variant="warning", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)




class HelpScreen(ModalScreen[None]):
    """Every key, in one place. At 80x24 the list is taller than the screen: it scrolls by
    the keys (it has the focus), as the title says."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static("tfdist-tui keys  (up/down, pgup/pgdn: scroll; esc: close)", id="help-title")
            yield Static(help_text(), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
