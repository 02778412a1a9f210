"""Frozen dataclass objects made at once (tui.common.quick): the same as their class makes."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from trainer import protocol
from tui.common.quick import maker
from tui.core.events import TaskOutput, TrainerEvent
from tui.core.progress import WorkerProgress
from tui.launch.lines import Stream

STEP = dict(role="worker", index=3, t=12.5, global_step=40, local_step=7, loss=0.25, examples_per_sec=80.0,
            step_time=0.2, target=100, accuracy=None, coordinator=False, by_worker=())
MADE = [
    (protocol.Step, STEP),
    (TaskOutput, dict(task="worker3", stream=Stream.STDERR, lines=("a", "b"), events=frozenset({1}),
                      noise=frozenset(), continued=True, partial=False, t=3.0)),
    (TrainerEvent, dict(task="worker3", event=protocol.Step(**STEP), t=4.0)),
    (WorkerProgress, dict(task="worker3", global_step=40, local_step=7, examples_per_sec=80.0, loss=None,
                          coordinates=True, via="")),
]


@pytest.mark.parametrize(("cls", "fields"), MADE, ids=[cls.__name__ for cls, _ in MADE])
def test_an_object_made_at_once_is_the_one_its_class_makes(cls: type, fields: dict[str, object]) -> None:
    quick, usual = maker(cls)(**fields), cls(**fields)
    assert type(quick) is cls
    assert quick == usual and hash(quick) == hash(usual) and repr(quick) == repr(usual)
    assert dataclasses.asdict(quick) == dataclasses.asdict(usual)
    assert pickle.loads(pickle.dumps(quick)) == usual and copy.deepcopy(quick) == usual
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.t = 0.0  # type: ignore[attr-defined]


def test_a_class_whose_init_does_more_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            assert self.value >= 0

    @dataclasses.dataclass
    class Mutable:
        value: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        value: int

    for cls in (Checked, Mutable, Slotted, int):
        with pytest.raises(ValueError, match="not a frozen dataclass"):
            maker(cls)


def test_a_call_that_leaves_a_field_out_is_refused() -> None:
    fields = dict(STEP)
    del fields["by_worker"]  # as a caller written before the field was added would
    with pytest.raises(TypeError, match="by_worker"):
        maker(protocol.Step)(**fields)
