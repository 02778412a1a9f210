"""Which Python a path is (tui.launch.local.interpreter): a venv's interpreter is known by the
path it was started from, never by the base interpreter its symlink points to."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.venvs import plain_venv
from tui.launch.local.interpreter import identify, locate, this_interpreter


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_venv(tmp_path_factory.mktemp("venv") / "v")


async def test_a_venv_is_its_own_interpreter_and_its_link_target_is_another(venv_python: Path) -> None:
    venv = venv_python.parent.parent
    mine = await identify(str(venv_python))
    assert mine is not None and mine.prefix == str(venv) and mine.executable == str(venv_python)
    # Through the resolved link it is the base interpreter: another prefix, another pool.
    base = await identify(os.path.realpath(venv_python))
    assert base is not None and base.prefix != str(venv) and base != mine
    # Two names of one venv's Python are one interpreter by what they report.
    other_name = venv_python.parent / "python3"
    same = await identify(str(other_name))
    assert same is not None and same.identity == mine.identity and same.executable == str(other_name)


async def test_what_is_not_a_python_that_answers() -> None:
    assert await identify("/bin/echo") is None
    assert await identify("/nonexistent/python") is None
    assert await identify("/bin/false") is None
    assert await identify(sys.executable) == this_interpreter()


def test_locate_keeps_the_path_as_given(venv_python: Path, tmp_path: Path) -> None:
    path = str(venv_python.parent)
    assert locate("python", path) == str(venv_python)  # on PATH: not resolved to the base
    assert locate(str(venv_python), None) == str(venv_python)
    assert locate("no-such-python-here", path) is None
    assert locate(str(tmp_path / "missing"), None) is None
