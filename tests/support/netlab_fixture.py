"""The ``netlab`` pytest fixture: a factory of labs of real hosts (tests/support/netlab.py).
Registered suite-wide in tests/conftest.py; its users carry the ``netlab`` marker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.netlab import LabUnavailable, NetLab, missing_requirements

#: ``netlab(count)`` makes a lab of ``count`` hosts, torn down when the test ends.
MakeLab = Callable[[int], NetLab]


@pytest.fixture
def netlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeLab]:
    """Make labs of hosts with ``netlab(count)``; each is torn down after the test, passed or
    failed. Skips where this machine cannot make one (not root, no ``ip`` or ``sshd``)."""
    why = missing_requirements()
    if why:
        pytest.skip(why)
    made: list[NetLab] = []

    def make(count: int) -> NetLab:
        directory: Path = tmp_path_factory.mktemp("netlab")
        try:
            lab = NetLab(count, directory)
        except LabUnavailable as error:
            pytest.skip(f"no host lab on this machine: {error}")
        made.append(lab)
        return lab

    yield make
    errors = []
    for lab in reversed(made):
        try:
            lab.close()
        except RuntimeError as error:
            errors.append(str(error))
    assert not errors, errors
