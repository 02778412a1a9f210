"""What ``$PAGER`` is given: an inert copy of a task's log, not the run directory's file.

The log file keeps a task's bytes as written, escape sequences included: ``less -R`` (the
default pager) passes them to the terminal, where an OSC 8 hyperlink, an OSC 52 clipboard
write or a title change does what the task wanted. The app shows nothing of that
on screen (:func:`tui.common.terminal.inert`); the pager gets the same treatment: a copy made
line by line through that one filter, in a private folder, removed when the pager ends.
(Colours go too: a pager filter that knew which sequences are harmless would be a second
sanitiser to keep right.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tui.common.terminal import inert


@contextmanager
def inert_copy(path: Path) -> Iterator[Path]:
    """A copy of ``path`` with every line made inert, named as it is (the pager shows the
    name), in a folder only this user can read; removed on leaving the block."""
    folder = Path(tempfile.mkdtemp(prefix="tfdist-pager-"))  # 0700
    try:
        target = folder / path.name
        # newline="": a carriage return ends a line too (a progress bar's redraws), so no
        # line keeps one to move the pager's cursor.
        with open(path, encoding="utf-8", errors="replace", newline="") as source, \
                open(target, "w", encoding="utf-8") as copy:
            for line in source:
                copy.write(inert(line.rstrip("\r\n")) + "\n")
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)
