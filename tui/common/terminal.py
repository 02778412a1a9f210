"""The one sanitiser for text that reaches a screen.

Everything a task prints, a remote host answers or a file in a run directory holds is
someone else's text. Written raw to a terminal it can drive it: ``ESC ] 52`` writes the
operator's clipboard, ``ESC ] 2`` the window title, ``ESC [ 2 J`` wipes the screen, a C1
control (U+009B is a one-character CSI on some terminals) does the same without an ESC, and
bidi overrides (U+202E) make a line read backwards. :func:`inert` turns such text into plain
characters; every front end passes foreign text through it, and only through it, before it
shows it (the run directory's logs keep the raw bytes).

Pure and cheap: a line with nothing to remove (nearly every line) costs one regex search.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TextIO

__all__ = ["inert", "is_inert", "one_line", "wants_colour", "without_sequences"]

# Sequences removed whole, so that their parameters do not show up as junk: CSI (ESC [ or
# U+009B, parameters, intermediates, one final byte), the string commands OSC, DCS, SOS, PM
# and APC (ESC ] P X ^ _, or U+009D 90 98 9E 9F) up to their terminator (BEL, ESC \, U+009C)
# or, unterminated, to the end of the line (a terminal would swallow more; what is left is
# inert either way, and one line's junk must not hide the next lines), and the
# two-character escapes (ESC followed by one character).
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x7e]?"
)

# What is left after the sequences: C0 controls but tab (newline is kept only where asked),
# DEL, every C1 control, and the format characters that change how text reads or where it
# goes without showing anything: the Arabic letter mark, zero-width spaces and joiners, the
# left-to-right/right-to-left marks, line/paragraph separators, bidi embeddings, overrides
# and isolates (U+202A-202E, U+2066-2069), invisible operators, the byte order mark and the
# interlinear annotation characters.
_FORMAT = "\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
_STARTS = re.compile("[\x1b\x90\x98\x9b\x9d-\x9f]")
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_FORMAT}]")
_UNSAFE_KEEP_NEWLINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}]")


# The same for text that is all ASCII (nearly all output), as bytes to delete: checking it
# this way is four times faster than the regex search (a batch of a flood is 64 KiB).
_ASCII_UNSAFE = bytes([*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f])
_ASCII_UNSAFE_KEEP_NEWLINE = bytes([*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f])


def inert(text: str, *, newlines: bool = False) -> str:
    """``text`` as plain characters for a screen: escape sequences, control characters
    (tabs kept; newlines kept only with ``newlines=True``, for multi-line text) and
    invisible format characters removed."""
    if is_inert(text, newlines=newlines):
        return text  # the common case: one scan, no copy
    unsafe = _UNSAFE_KEEP_NEWLINE if newlines else _UNSAFE
    return unsafe.sub("", _SEQUENCES.sub("", text))


def is_inert(text: str, *, newlines: bool = False) -> bool:
    """Whether ``text`` holds nothing :func:`inert` would remove."""
    if text.isascii():
        data = text.encode("ascii")
        unsafe_bytes = _ASCII_UNSAFE_KEEP_NEWLINE if newlines else _ASCII_UNSAFE
        return len(data.translate(None, unsafe_bytes)) == len(data)
    return (_UNSAFE_KEEP_NEWLINE if newlines else _UNSAFE).search(text) is None


def without_sequences(text: str) -> str:
    """``text`` without its escape sequences (colours, cursor moves), control characters
    kept: for parsers of output that mean its carriage returns (Keras redraws its progress
    bar with ``\\r``). Not for a screen: use :func:`inert` there."""
    return _SEQUENCES.sub("", text) if _STARTS.search(text) else text


def one_line(text: str) -> str:
    """``text`` itself when it is inert and one line, else its Python ``repr`` (quoted, with
    newlines, controls and format characters escaped): for a name from a user or a file
    written into a comment of a file another program reads (an sbatch script, a manifest,
    a hosts.yaml), where a newline would begin a line of code that then runs."""
    return text if is_inert(text) else repr(text)


def wants_colour(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, and no ``NO_COLOR`` in the
    environment (https://no-color.org). Set at all, even empty, it counts, as it does for
    Textual, so that the app and the headless front end agree."""
    return "NO_COLOR" not in os.environ and stream.isatty()


#: Longer output lines are cut on screen (never in the run directory's logs).
DISPLAY_LINE_CHARS = 4000


def display_lines(head: str, lines: Sequence[str], task: str) -> str:
    """Lines of a task's output for the terminal, each behind ``head``: made inert (and an
    over-long one cut) in one pass over them all, not a call per line."""
    if max(map(len, lines)) > DISPLAY_LINE_CHARS:
        return "".join(f"{head}{display_line(line, task)}\n" for line in lines)
    return head + inert("\n".join(lines), newlines=True).replace("\n", f"\n{head}") + "\n"


def display_line(text: str, task: str) -> str:
    """One line of ``task``'s output for the terminal: inert, and cut past
    :data:`DISPLAY_LINE_CHARS` with a pointer to the task's log, which keeps it whole."""
    text = inert(text)
    if len(text) > DISPLAY_LINE_CHARS:
        rest = len(text) - DISPLAY_LINE_CHARS
        text = text[:DISPLAY_LINE_CHARS] + f"... ({rest} more characters in logs/{task}.log)"
    return text
