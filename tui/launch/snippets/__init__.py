"""Small standard-library Python programs the SSH launcher runs on remote hosts with
``python -c``. Each prints one ``tfdist-result <json>`` line; :func:`source` reads a program's
text and :func:`parse_result` finds its answer in the output.

They target any Python 3.7+ (the remote interpreter is the user's, not ours), import
nothing outside the standard library, and are plain modules here so that linters and tests
see them like any other code."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

RESULT_PREFIX = "tfdist-result "


#: Put after a snippet's ``__future__`` import: ``python -c`` puts the current folder first on
#: ``sys.path`` (as ``''``), where a user's ``json.py`` or ``signal.py`` would stand in for the
#: standard library's. ``-I`` would do it too, but also drop PYTHONPATH and the user's
#: site-packages, where a host's TensorFlow (which the probe imports) may live.
_NO_CWD = "import sys as _sys; _sys.path[:] = [_p for _p in _sys.path if _p]  # not the cwd\n"
_FUTURE = "from __future__ import annotations\n"


@functools.cache
def source(name: str) -> str:
    """The text of the snippet ``name`` (``probe``, ``ports``, ``tasks``), made to import
    nothing from the folder it runs in."""
    text = (Path(__file__).parent / f"{name}.py").read_text(encoding="utf-8")
    head, future, body = text.partition(_FUTURE)
    return f"{head}{future}{_NO_CWD}{body}" if future else _NO_CWD + text


def parse_result(stdout: str) -> Any | None:
    """The JSON value of the last ``tfdist-result`` line of ``stdout``, or None if there is
    none (the snippet did not get that far) or it is not JSON."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                return json.loads(line[len(RESULT_PREFIX):])
            except ValueError:
                return None
    return None
