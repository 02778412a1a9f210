"""``trainer.tfimport``'s import helper: the collector off for the body, then the body's
objects frozen and the collector back on (as it was)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from trainer.tfimport import collector_paused


@pytest.fixture
def clean_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    if was:
        gc.enable()


@pytest.mark.usefixtures("clean_gc")
def test_the_body_runs_without_the_collector_and_its_objects_are_frozen_after() -> None:
    gc.unfreeze()
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        made = [[i] for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)


@pytest.mark.usefixtures("clean_gc")
def test_a_collector_already_off_stays_off_and_nothing_is_frozen() -> None:
    gc.unfreeze()
    gc.disable()
    with collector_paused():
        made = [[i] for i in range(1_000)]
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0 and made


@pytest.mark.usefixtures("clean_gc")
def test_the_collector_comes_back_when_the_body_raises() -> None:
    gc.enable()
    with pytest.raises(ImportError), collector_paused():
        raise ImportError("no such module")
    assert gc.isenabled()
