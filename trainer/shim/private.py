"""Keeping the shim out of the user's way: once the hooks are armed, every module of ours
(``trainer`` and ``trainer.*``) is moved in ``sys.modules`` to a private name and the folder
that holds our ``trainer`` package (locally the controller's checkout, with ``tui/`` beside it)
leaves ``sys.path`` and ``PYTHONPATH``. A user's package called ``trainer`` (the Cloud ML
Engine layout) or ``tui`` is then the one the program imports, as when it runs by hand.

Our modules keep working under their private names: they hold each other by reference, and
everything they import later (TensorFlow, ``tfdist_report``) is not ours."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Prefix of the names our modules are kept under while the user's program runs.
PRIVATE_PREFIX = "_tfdist_"
#: Our top-level package: the name a user's own package must be free to take.
OUR_PACKAGE = "trainer"


def our_root() -> Path:
    """The folder holding our ``trainer`` package."""
    return Path(__file__).resolve().parent.parent.parent


def is_ours(name: str) -> bool:
    """Whether the module ``name`` is one of ours (by its public name)."""
    return name == OUR_PACKAGE or name.startswith(OUR_PACKAGE + ".")


def hide() -> None:
    """Move our modules to private names and drop our root from the import path (and from
    the ``PYTHONPATH`` the program's own subprocesses inherit). Call after every module the
    shim needs later is imported."""
    root = our_root()
    for name in [n for n in sys.modules if is_ours(n)]:
        sys.modules[PRIVATE_PREFIX + name] = sys.modules.pop(name)
    sys.path[:] = [p for p in sys.path if not _same(p, root)]
    inherited = os.environ.get("PYTHONPATH")
    if inherited is not None:
        kept = [p for p in inherited.split(os.pathsep) if p and not _same(p, root)]
        if kept:
            os.environ["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del os.environ["PYTHONPATH"]


def _same(entry: str, root: Path) -> bool:
    try:
        return Path(entry or os.curdir).resolve() == root
    except OSError:
        return False
