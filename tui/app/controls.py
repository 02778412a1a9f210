"""Every key the operator has, declared once: the app's bindings, its help screen, its
command palette and its status bar are made from :data:`CONTROLS` and :data:`TOGGLES`, and
the command line offers an override (``--mode`` ...) for every toggled setting. Adding a
control is one entry here plus the app's ``action_<name>`` method. (Data only: the core
never imports Textual.)"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tui.program.base import Setting


class Section(Enum):
    """Where a control is listed on the help screen."""

    TASKS = "Tasks[/b] (the selected row of the table)"
    SETTINGS = "Settings[/b] (pending until you relaunch)"
    VIEWS = "Views"


@dataclass(frozen=True)
class Toggle:
    """A training setting the operator can change in the app (it applies on relaunch), and
    so the command line can override: ``--<setting>``. ``label`` precedes its value in the
    status bar."""

    setting: Setting
    label: str = ""


#: In status-bar order.
TOGGLES = (Toggle(Setting.MODE), Toggle(Setting.PARTITIONS, "partitions "), Toggle(Setting.PLACEMENT),
           Toggle(Setting.FUSE))


@dataclass(frozen=True)
class Control:
    """One key. ``key``: Textual's key name; ``display``: how people write it; ``action``:
    the app's action (None: a key a widget handles itself, listed in the help only);
    ``name``: the footer label; ``help``: one line for the help screen and the palette;
    ``confirm``: it asks first (the help says so); ``footer``: shown in the footer; ``priority``: wins over
    the focused widget's own binding; ``pane``: the pane whose view owns the action (its
    bindings, while it has focus), else the app's."""

    key: str
    display: str
    action: str | None
    name: str
    help: str
    section: Section
    confirm: bool = False
    footer: bool = True
    priority: bool = False
    pane: str | None = None

    @property
    def in_palette(self) -> bool:
        """Offered in the command palette (quit and help are there already); a pane's keys
        only act in their pane."""
        return self.action is not None and self.pane is None and self.action not in ("quit", "help")

    def help_line(self) -> str:
        return self.help + (" (asks first)" if self.confirm else "")


_T, _S, _V = Section.TASKS, Section.SETTINGS, Section.VIEWS

CONTROLS: tuple[Control, ...] = (
    Control("s", "s", "start_task", "Start", "start the task", _T),
    Control("x", "x", "stop_task", "Stop", "stop it (a ps ends the run: asks first)", _T),
    Control("r", "r", "restart_task", "Restart", "restart it", _T),
    Control("S", "S", "start_all", "Start all",
            "start every stopped task (after a run: a new run, asks first)", _T, footer=False),
    Control("X", "X", "stop_all", "Stop all", "stop every task", _T, confirm=True),
    # The settings keys are in the help and the palette, not the footer: 80 columns hold
    # only the keys an operator needs most.
    Control("m", "m", "toggle_mode", "Sync/async", "toggle sync / async", _S, footer=False),
    Control("plus", "+", "partitions(1)", "+Part", "one more partition", _S, footer=False),
    Control("minus", "-", "partitions(-1)", "-Part", "one partition fewer", _S, footer=False),
    Control("p", "p", "toggle_placement", "Placement", "placement: greedy / round_robin", _S,
            footer=False),
    Control("u", "u", "toggle_fuse", "Fuse",
            "fuse: one transfer per ps each way a step / one per variable", _S, footer=False),
    Control("R", "R", "relaunch", "Relaunch", "relaunch the cluster with the pending settings", _S,
            confirm=True),
    # As in less: / searches (every line kept, the matches marked, n / N go from one to
    # the next), & filters (only the lines holding the text). Both win over the focused
    # widget, so that keys typed right after them go into their field, not to the table
    # (where x stops a task); in a field they are text (tui.app.logactions).
    Control("slash", "/", "search", "Search", "search the logs (esc clears)", _V, priority=True),
    Control("n", "n", "search_next", "Next", "next match", _V, footer=False),
    Control("N", "N", "search_previous", "Previous", "previous match", _V, footer=False),
    Control("ampersand", "&", "filter", "Filter", "filter the logs by text (esc clears)", _V,
            footer=False, priority=True),
    # (Not in the footer: the tabs are on screen, and 80 columns need the room.)
    Control("tab", "tab", "next_pane", "Pane", "next pane", _V, footer=False, priority=True),
    Control("shift+tab", "shift+tab", "previous_pane", "Pane", "previous pane", _V, footer=False,
            priority=True),
    # The task table binds End to this too (its own End, to the last row, is ctrl+end).
    Control("end", "End", "follow_log", "Follow", "follow the log's tail again", _V, footer=False),
    Control("f", "f", "toggle_follow", "Follow", "follow the log on / off (shown on its border)", _V,
            footer=False),
    Control("l", "l", "focus_log", "Log",
            "into the log or pane shown, to scroll it (up/down, pgup/pgdn); l again: back", _V),
    Control("w", "w", "toggle_split", "Split",
            "pin the task's log beside the selected one's (w again: close)", _V, footer=False),
    Control("C", "C", "copy_log", "Copy",
            "copy the selection, else the match's line, else the lines shown", _V, footer=False),
    Control("up,down", "up/down", None, "Select", "select a task", _V),
    Control("v", "v", "open_pager", "Pager", "the selected task's whole log in $PAGER (the app waits)", _V,
            footer=False),
    Control("t", "t", "open_tensorboard", "TensorBoard",
            "TensorBoard for this run (Runs tab: the selected runs); its address in All logs", _V,
            footer=False),
    Control("o", "o", "sort_tasks", "Sort", "sort the tasks: declared, CPU, memory, global step, state", _V,
            footer=False),
    Control("ctrl+p", "ctrl+p", None, "Palette", "command palette", _V),
    Control("question_mark", "?", "help", "Help", "this help", _V),
    # The Runs pane's list (tui.app.runs.RunsView binds these while it has focus).
    Control("space", "space", "toggle_run", "Select run", "select a run", _V, pane="runs"),
    Control("c", "c", "compare_runs", "Compare", "compare selected runs", _V, pane="runs"),
    Control("g", "g", "reload_runs", "Reload runs", "reload runs", _V, pane="runs"),
    # The Hosts pane's table (tui.app.hostsview.HostsView binds these while it has focus).
    Control("o", "o", "sort_hosts", "Sort hosts",
            "sort the hosts: host, state, tasks, CPU, memory, traffic, last heard", _V, pane="hosts"),
    Control("h", "h", "filter_by_host", "Host's tasks",
            "show only the selected host's tasks in the task table (esc there: all)", _V, pane="hosts"),
    Control("q", "q", "quit", "Quit", "quit (stops every task; asks while tasks run)", _V),
    # Keys Textual's widgets and dialogs handle themselves (listed so every key is here).
    Control("ctrl+q", "ctrl+q", None, "Quit", "quit, as q", _V, footer=False),
    Control("escape", "Esc", None, "Close", "close the help or a dialog (no); clear the search or filter; "
            "in the task table: show every host's tasks again",
            _V, footer=False),
    Control("y,n", "y / n", None, "Answer", "answer a question (enter: the focused button)", _V,
            footer=False),
)


#: Said once on the help screen, below its section.
SECTION_NOTES = {
    Section.SETTINGS: "+, - and p preview the new placement (Placement tab).",
    Section.VIEWS: "On the Placement and Throughput tabs, l goes into the pane to scroll it.",
}


#: The help screen's text width: it fits 80 columns.
_WIDTH = 72


def help_text() -> str:
    """The help screen's text (Rich markup), every control by section, short entries packed
    side by side so the screen fits 80x24."""
    lines: list[str] = []
    for section in Section:
        title = section.value if "[/b]" in section.value else f"{section.value}[/b]"
        lines.append(f"[b]{title}")
        line = ""
        for control in (c for c in CONTROLS if c.section is section and c.help):
            entry = f"{control.display}  {control.help_line()}"
            if line and len(line) + 4 + len(entry) <= _WIDTH:
                line += "    " + entry
            else:
                if line:
                    lines.append("  " + line)
                line = entry
        lines.append("  " + line)
        if note := SECTION_NOTES.get(section):
            lines.append(f"  {note}")
    lines.append("")
    lines.append("Full logs, events and the summary of every run are in its run directory.")
    return "\n".join(lines) + "\n"


def key_table() -> str:
    """The guide's key table (Markdown, docs/app.md), made from :data:`CONTROLS` like the help
    screen; a test keeps the guide's copy the same."""
    lines = ["| key | what it does | where |", "|---|---|---|"]
    for control in CONTROLS:
        where = f"{control.pane.capitalize()} pane" if control.pane else section_name(control.section)
        lines.append(f"| `{control.display}` | {control.help_line()} | {where} |")
    return "\n".join(lines) + "\n"


def section_name(section: Section) -> str:
    """A section's title without its markup or note."""
    return section.value.split("[/b]")[0]
