"""Search in a log pane, as a pager searches (``/text``, then ``n`` / ``N``): where a text
occurs in the pane's lines and which match is the current one. No Textual here; the pane
(:class:`~tui.app.logs.LogPane`) highlights and scrolls, this only counts.

The text is literal and case-insensitive (an operator searching for ``[worker1]`` or
``loss (avg)`` means those characters, not a regular expression). A pane is bounded: lines
drop off its top while new ones arrive, so lines are numbered from the first one the pane
showed since it was last cleared, and a match keeps its number while the lines before it
go; its index in the pane is its number less the lines dropped."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

#: The longest search text the border repeats (the pane is 40 columns wide when split).
SHOWN_CHARS = 24


class LogSearch:
    """The matches of one search text in one pane's lines, in order, and the current one."""

    def __init__(self) -> None:
        self.text = ""
        self._needle = ""
        self._matches: list[int] = []  # line numbers, ascending
        self._current: int | None = None  # one of _matches, or none yet
        self._dropped = 0  # lines dropped off the top: the number of the pane's first line
        self._next = 0  # the number the next line added gets
        #: The last step went round the end (or the start) of the pane.
        self.wrapped = False

    # -- following the pane's lines -------------------------------------------------------

    def reset(self, text: str, lines: Sequence[str] = ()) -> None:
        """Search for ``text`` (empty: no search) in a pane now showing ``lines``."""
        self.text = text
        self._needle = text.lower()
        self._matches, self._current, self._dropped, self._next = [], None, 0, 0
        self.wrapped = False
        self.added(lines)

    def added(self, lines: Sequence[str]) -> None:
        """The pane showed these lines after its others."""
        needle, first = self._needle, self._next
        self._next += len(lines)
        if needle:  # (without a search, counting them is all: a flood costs nothing more)
            self._matches.extend(first + n for n, line in enumerate(lines) if needle in line.lower())

    def column(self, line: str) -> int:
        """Where the match starts in ``line`` (-1: nowhere)."""
        return line.lower().find(self._needle) if self._needle else -1

    def dropped(self, count: int) -> None:
        """``count`` lines went off the pane's top. A current match among them is no longer
        current: the next ``n`` starts again from the view."""
        if count <= 0:
            return
        self._dropped += count
        del self._matches[:bisect_left(self._matches, self._dropped)]
        if self._current is not None and self._current < self._dropped:
            self._current = None

    # -- what the operator sees -----------------------------------------------------------

    @property
    def count(self) -> int:
        """Matching lines in the pane."""
        return len(self._matches)

    @property
    def current_index(self) -> int | None:
        """The current match's line, as an index into the pane's lines; None: none yet."""
        return None if self._current is None else self._current - self._dropped

    def is_match(self, index: int) -> bool:
        """Whether the pane's line ``index`` matches."""
        number = index + self._dropped
        at = bisect_left(self._matches, number)
        return at < len(self._matches) and self._matches[at] == number

    def step(self, forward: bool, view_top: int, view_bottom: int) -> int | None:
        """Make the next (``forward``) or previous match current and return its index in the
        pane; None when nothing matches. With no current match yet, the first one from the
        top of the view down (the last one from its bottom up), as ``less`` starts from the
        screen. Goes round at either end (and says so: :attr:`wrapped`)."""
        matches = self._matches
        if not matches:
            self._current, self.wrapped = None, False
            return None
        if self._current is None:
            if forward:
                at = bisect_left(matches, view_top + self._dropped)
            else:
                at = bisect_right(matches, view_bottom + self._dropped) - 1
            self.wrapped = not 0 <= at < len(matches)
        else:
            at = bisect_left(matches, self._current) + (1 if forward else -1)
            self.wrapped = not 0 <= at < len(matches)
        self._current = matches[at % len(matches)]
        return self._current - self._dropped

    def status(self) -> str:
        """For the pane's border: ``match 3/17``, ``17 matches``, ``no match for 'x'``;
        empty without a search."""
        if not self.text:
            return ""
        shown = self.text if len(self.text) <= SHOWN_CHARS else self.text[:SHOWN_CHARS] + "…"
        if not self._matches:
            return f"no match for '{shown}'"
        if self._current is None:
            count = len(self._matches)
            return f"{count} match{'es' if count > 1 else ''} for '{shown}' (n/N)"
        ordinal = bisect_left(self._matches, self._current) + 1
        return f"match {ordinal}/{len(self._matches)}" + (" (wrapped)" if self.wrapped else "")
