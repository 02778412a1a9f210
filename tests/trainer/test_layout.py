""":mod:`trainer.layout` (the placement without TensorFlow, which the app previews) against
TensorFlow's own: the graph :func:`trainer.graph.build` makes, for every model, strategy and
a range of partition counts (1: no partitioner; 2, 3: uneven shards; 16: more shards than
some variables have rows, so those stay whole), with every optimizer (their slots) and both
modes on 1 to 4 ps."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

from trainer import data, layout
from trainer.cluster import Cluster
from trainer.settings import Dataset, Mode, Model, Optimizer, PlacementStrategy, TrainingSettings

PARTITIONS = (1, 2, 3, 16)
#: The convolutional models' graphs take seconds each to build (VGG-19 most): the suite checks
#: them on a few cases that still turn every rule (no partitioner, uneven shards, more shards
#: than rows, both strategies); TFDIST_LAYOUT_ALL=1 checks them on every case, as the MLPs are.
BIG_MODELS_SAMPLE = (0, 3, 6)


@pytest.fixture(scope="module")
def tf() -> Any:
    from trainer.tfimport import import_tf

    return import_tf()


def cases(model: Model) -> list[tuple[TrainingSettings, int]]:
    """Each strategy with each partition count; optimizer, mode and ps count turn with them,
    so every model meets every optimizer and mode."""
    turns = itertools.count()
    found = []
    for strategy, partitions in itertools.product(PlacementStrategy, PARTITIONS):
        turn = next(turns)
        settings = TrainingSettings(
            model=model, placement=strategy, partitions=partitions,
            optimizer=list(Optimizer)[turn % len(Optimizer)], mode=list(Mode)[turn // 4 % 2],
            # VGG-19 on its own synthetic data at the smallest size: its graph is the same.
            dataset=Dataset.SYNTHETIC if model is Model.VGG19 else Dataset.DIGITS,
            input_size=32 if model is Model.VGG19 else None)
        found.append((settings, 1 + turn % 4))
    return found


def tensorflows(tf: Any, settings: TrainingSettings, num_ps: int) -> Any:
    from trainer.graph import build

    cluster = Cluster(tuple(f"ps{i}:1" for i in range(num_ps)), ("worker0:1", "worker1:1"))
    return build(tf, settings, cluster, 0, data.input_shape(settings)).placement


def test_the_cases_cover_every_optimizer_mode_and_strategy() -> None:
    for model in Model:
        found = cases(model)
        assert {s.optimizer for s, _ in found} == set(Optimizer)
        assert {s.mode for s, _ in found} == set(Mode)
        assert {(s.placement, s.partitions) for s, _ in found} == set(
            itertools.product(PlacementStrategy, PARTITIONS))


def checked_cases(model: Model) -> list[tuple[TrainingSettings, int]]:
    """The cases the suite checks for ``model`` (every one for the quick models)."""
    every = cases(model)
    if model in (Model.SOFTMAX, Model.MLP) or os.environ.get("TFDIST_LAYOUT_ALL") == "1":
        return every
    return [every[i] for i in BIG_MODELS_SAMPLE]


def test_the_sample_of_the_big_models_turns_every_rule() -> None:
    sample = [cases(Model.VGG19)[i] for i in BIG_MODELS_SAMPLE]
    assert {s.placement for s, _ in sample} == set(PlacementStrategy)
    assert {s.partitions for s, _ in sample} >= {1, 3, 16}
    assert len({n for _, n in sample}) > 1


@pytest.mark.parametrize("model", list(Model), ids=lambda m: m.value)
def test_layout_is_tensorflows_placement(tf: Any, model: Model) -> None:
    for settings, num_ps in checked_cases(model):
        want = tensorflows(tf, settings, num_ps)
        got = layout.plan(settings, num_ps)
        what = f"{settings.placement.value}, partitions {settings.partitions}, " \
               f"{settings.optimizer.value}, {settings.mode.value}, {num_ps} ps"
        assert got.variables == want.variables, what
        assert (got.ps_bytes, got.num_ps, got.partitions, got.strategy, got.model) == (
            want.ps_bytes, want.num_ps, want.partitions, want.strategy, want.model), what


def test_no_tensorflow_is_imported() -> None:
    import subprocess
    import sys

    probe = ("import sys; from trainer import layout; from trainer.settings import TrainingSettings; "
             "layout.plan(TrainingSettings(partitions=3), 2); print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
