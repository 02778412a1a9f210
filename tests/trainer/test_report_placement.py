"""``tfdist_report.placement`` without TensorFlow: TF2-shaped variables (a ShardedVariable,
its parts as tf.Module lists them, one off the ps) become one placement event."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.trainer.test_shim_units import load_report, parsed
from trainer import protocol


@dataclass(frozen=True)
class DType:
    name: str
    size: int


@dataclass
class Var:
    name: str
    shape: tuple[int, ...]
    device: str
    dtype: DType = DType("float32", 4)
    trainable: bool = True


@dataclass
class Sharded:
    name: str
    variables: list[Var]


def ps(i: int) -> str:
    return f"/job:ps/replica:0/task:{i}/device:CPU:0"


def test_placement_groups_parts_into_shards(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TFDIST_RUN_ID", "r")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"ps": ["a:1", "b:1", "c:1"]},
                                                "task": {"type": "chief", "index": 0}}))
    report = load_report()
    report.placement([
        Sharded("emb", [Var("emb/part_0:0", (6, 4), ps(0)), Var("emb/part_1:0", (4, 4), ps(1))]),
        Var("dense/part_0:0", (8, 2), ps(1)), Var("dense/part_1:0", (8, 2), ps(0)),  # tf.Module's way
        Var("step:0", (), ps(1), DType("int64", 8), trainable=False),
        Var("local:0", (3,), "/job:chief/replica:0/task:0/device:CPU:0"),
    ], model="m", strategy="ParameterServerStrategy")
    (event,) = parsed(capsys.readouterr().out)
    assert isinstance(event, protocol.Placement) and (event.role, event.model) == ("chief", "m")
    assert [(v.variable, v.shard, v.num_shards, v.ps, v.bytes) for v in event.variables] == [
        ("emb", 0, 2, 0, 96), ("emb", 1, 2, 1, 64), ("dense", 0, 2, 1, 64), ("dense", 1, 2, 0, 64),
        ("step", 0, 1, 1, 8)]
    # TF_CONFIG names 3 ps, one of them holds nothing: it still counts.
    assert (event.num_ps, event.ps_bytes, event.partitions) == (3, (160, 136, 0), 2)
    assert event.unattributed == ("local: on /job:chief/replica:0/task:0/device:CPU:0, not on a ps",)
    assert not event.variables[-1].trainable


def test_placement_is_silent_when_run_by_hand(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TFDIST_RUN_ID", raising=False)
    monkeypatch.delenv("TFDIST_SHIM", raising=False)
    load_report().placement([Var("w:0", (2,), ps(0))])
    assert capsys.readouterr().out == ""
