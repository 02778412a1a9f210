"""Plain virtual environments for tests, as a user's ``python3 -m venv v`` makes them: no
system site-packages, ``bin/python`` a symlink to the base interpreter. Made without pip
(seconds, no network); a ``.pth`` file puts the folder where this interpreter finds
TensorFlow (and, beside it, the project's other dependencies) on the venv's path, so the
venv sees them through its own site-packages alone, never through the base interpreter's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path


def dependencies_folder() -> Path:
    """The site-packages folder that holds TensorFlow for this interpreter (not imported)."""
    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None and spec.submodule_search_locations, "TensorFlow is not installed"
    return Path(next(iter(spec.submodule_search_locations))).parent


def plain_venv(folder: Path) -> Path:
    """A plain venv at ``folder`` seeing the dependencies through a ``.pth``; its python."""
    subprocess.run([sys.executable, "-I", "-m", "venv", "--without-pip", str(folder)], check=True,
                   stdin=subprocess.DEVNULL)
    (site,) = (folder / "lib").glob("python3*/site-packages")
    (site / "tfdist-test-dependencies.pth").write_text(f"{dependencies_folder()}\n")
    return folder / "bin" / "python"


def plant_shadows(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Modules (``NAME.py``) or packages (``NAME/``, for names ending in ``/``) in ``folder``
    named like the standard library's or a dependency's, as a user may have them: each
    leaves ``NAME.imported`` beside itself and fails, so whoever imported it fails loudly
    and the test can tell it happened. The marker files to look for."""
    markers = []
    for name in names:
        bare = name.rstrip("/")
        body = (f"open({str(folder / (bare + '.imported'))!r}, 'w').close()\n"
                f"raise ImportError('the user s own {bare} was imported')\n")
        if name.endswith("/"):
            (folder / bare).mkdir()
            (folder / bare / "__init__.py").write_text(body)
        else:
            (folder / f"{bare}.py").write_text(body)
        markers.append(folder / f"{bare}.imported")
    return markers


#: Names a user's folder may hold that the controller's processes import themselves.
SHADOWING = ("secrets", "yaml", "logging", "asyncio", "typing", "json", "signal", "textual/",
             "asyncssh/", "trainer/", "tui/")
