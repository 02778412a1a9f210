"""The shim's logic that needs no TensorFlow: the reporting module's lines, the task read
from TF_CONFIG, and exit statuses."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from trainer import protocol
from trainer.shim import REPORT_DIR
from trainer.shim.__main__ import _exit_status
from trainer.shim.state import from_tf_config


def load_report() -> ModuleType:
    """A fresh ``tfdist_report`` (its rate limit is module state)."""
    spec = importlib.util.spec_from_file_location("tfdist_report_test", REPORT_DIR / "tfdist_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parsed(text: str) -> list[protocol.Event]:
    events = [protocol.parse_event(line) for line in text.splitlines()]
    assert None not in events, text
    return [e for e in events if e is not None]


def test_report_is_silent_when_run_by_hand(monkeypatch, capsys) -> None:
    monkeypatch.delenv("TFDIST_RUN_ID", raising=False)
    monkeypatch.delenv("TFDIST_SHIM", raising=False)
    report = load_report()
    report.step(3, loss=0.5, examples=32)
    report.eval(3, accuracy=0.9)
    report._last()
    assert capsys.readouterr().out == ""


def test_report_prints_protocol_events_at_a_limited_rate(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TFDIST_SHIM", "1")
    monkeypatch.setenv("TFDIST_TASK", "worker:1")
    report = load_report()
    for step in range(1, 101):
        report.step(step, loss=1.0 / step, accuracy=0.5, examples=32)
    report.eval(100, accuracy=0.75, loss=float("nan"), examples=500)
    first, last, evaluation = parsed(capsys.readouterr().out)
    # The first call prints, the 99 that follow within MIN_INTERVAL are held back until
    # the next print (here the eval's).
    assert isinstance(first, protocol.Step) and first.global_step == 1 and first.task == "worker1"
    assert isinstance(last, protocol.Step)
    assert (last.global_step, last.local_step) == (100, 100)
    assert last.loss == pytest.approx(0.01) and last.accuracy == 0.5
    assert isinstance(evaluation, protocol.Eval)
    assert (evaluation.accuracy, evaluation.loss, evaluation.examples) == (0.75, None, 500)


def test_report_takes_the_task_from_tf_config(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TFDIST_RUN_ID", "r1")
    monkeypatch.delenv("TFDIST_TASK", raising=False)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}, "task": {"type": "chief", "index": 0}}))
    report = load_report()
    report.step(7)
    (event,) = parsed(capsys.readouterr().out)
    assert event.task == "chief0"


@pytest.mark.parametrize(("text", "role", "index", "known"), [
    ('{"cluster": {"ps": ["a:1"], "worker": ["b:2", "c:3"]}, "task": {"type": "worker", "index": 1}}',
     "worker", 1, True),
    ('{"cluster": {"chief": ["a:1"]}, "task": {"type": "chief"}}', "chief", 0, True),
    (None, "worker", 0, False),
    ("not json", "worker", 0, False),
    ('{"task": {"type": "ps", "index": "x"}}', "worker", 0, False),
])
def test_task_from_tf_config(text, role, index, known) -> None:
    state = from_tf_config(text)
    assert (state.role, state.index, state.role_known) == (role, index, known)


def test_exit_status_as_python_makes_it(capsys) -> None:
    assert [_exit_status(c) for c in (None, 0, 3, 256 + 4)] == [0, 0, 3, 4]
    assert _exit_status("bad flag") == 1
    assert capsys.readouterr().err == "bad flag\n"


class _Variable:
    """What the TF2 step hook looks at of a variable: name, dtype, shape, value."""

    def __init__(self, name: str, integer: bool = True, shape: tuple[int, ...] = (), value: int = 0) -> None:
        self.name, self.shape, self._value = name, shape, value
        self.dtype = type("DType", (), {"is_integer": integer})()

    def numpy(self) -> int:
        return self._value


def test_the_tf2_step_counts_the_optimizers_batches(monkeypatch, capsys) -> None:
    """With ``steps_per_execution`` a scheduled function runs several batches: the step is
    the optimizer's iterations (Keras' ``iter``), not the functions finished."""
    from trainer.shim import tf2

    variables = [_Variable("dense/kernel:0", integer=False, shape=(16, 32)), _Variable("global_step:0"),
                 _Variable("SGD/iter:0", value=150), _Variable("counts:0", shape=(3,))]
    assert tf2.step_variable(variables) is variables[2]
    assert tf2.step_variable(variables[:2]) is variables[1]
    assert tf2.step_variable(variables[:1]) is None
    monkeypatch.setenv("TFDIST_SHIM", "1")
    monkeypatch.setattr(tf2._Tracker, "variables", variables)
    monkeypatch.setattr(tf2._Tracker, "step_variable", None)
    monkeypatch.setattr(tf2._Tracker, "finished", 15)
    monkeypatch.setattr(tf2._Tracker, "by_worker", {0: 7, 1: 8})
    monkeypatch.setattr(tf2._Tracker, "mark", (0, 0.0))
    tf2.emit_step()
    (step,) = parsed(capsys.readouterr().out)
    assert isinstance(step, protocol.Step)
    assert (step.global_step, step.coordinator, step.by_worker) == (150, True, (7, 8))


def test_tf2_rates_are_claimed_from_the_second_count_on_and_pair_running_batches_with_the_read(
        monkeypatch, capsys) -> None:
    """The first count's time holds the first function's tracing: no rate. Later, with
    functions still running, the optimizer's iterations count their batches too, so they are
    paired with the read's time, not the last finished function's (which made a 5,030 ex/s
    peak from a 1,561 ex/s epoch)."""
    from trainer.shim import tf2

    iterations = _Variable("SGD/iter:0", value=10)
    clock = [100.0]
    monkeypatch.setenv("TFDIST_SHIM", "1")
    monkeypatch.setattr(tf2.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(tf2, "_reported_recently", lambda: False)
    for name, value in (("variables", [iterations]), ("step_variable", None), ("scheduled", 3),
                        ("finished", 1), ("finished_at", 99.5), ("by_worker", {0: 1}), ("mark", (0, 90.0))):
        monkeypatch.setattr(tf2._Tracker, name, value)
    tf2.emit_step()
    (first,) = parsed(capsys.readouterr().out)
    assert isinstance(first, protocol.Step) and (first.global_step, first.step_time) == (10, 0.0)
    # A second later 2 more functions finished (the last at 100.6) and a third is half done.
    clock[0], iterations._value = 101.0, 35
    monkeypatch.setattr(tf2._Tracker, "finished", 3)
    monkeypatch.setattr(tf2._Tracker, "scheduled", 4)
    monkeypatch.setattr(tf2._Tracker, "finished_at", 100.6)
    tf2.emit_step()
    (second,) = parsed(capsys.readouterr().out)
    assert isinstance(second, protocol.Step) and second.step_time == 1.0 / 25
    # All done, the read late (the coordinator busy after fit): the last function's time.
    clock[0], iterations._value = 105.0, 40
    monkeypatch.setattr(tf2._Tracker, "finished", 4)
    monkeypatch.setattr(tf2._Tracker, "finished_at", 101.5)
    tf2.emit_step()
    (last,) = parsed(capsys.readouterr().out)
    assert isinstance(last, protocol.Step) and last.step_time == 0.5 / 5


def test_tf2_shards_are_named_by_their_variable_not_sharded_variable() -> None:
    from trainer.shim import tf2

    def shard(name: str, variable: str, ps: int, of: int = 1) -> protocol.VariableShard:
        return protocol.VariableShard(name=name, variable=variable, shard=ps if of > 1 else 0, num_shards=of,
                                      shape=(10, 4), dtype="float32", bytes=160, ps=ps)

    named = tf2._by_partition([
        shard("user_emb/part_0", "ShardedVariable", 0, 2), shard("user_emb/part_1", "ShardedVariable", 1, 2),
        shard("Adagrad/accumulator/user_emb/part_0", "Adagrad/accumulator/user_emb/part_0", 0),
        shard("Adagrad/accumulator/user_emb/part_1", "Adagrad/accumulator/user_emb/part_1", 1),
        shard("kernel", "kernel", 0), shard("kernel", "kernel", 1),
        # Two sharded slots a program named alike: each keeps its own count.
        shard("m/part_0", "ShardedVariable", 0, 2), shard("m/part_1", "ShardedVariable", 1, 2),
        shard("m/part_0", "ShardedVariable", 0, 2), shard("m/part_1", "ShardedVariable", 1, 2)])
    assert [(s.variable, s.shard, s.num_shards) for s in named] == [
        ("user_emb", 0, 2), ("user_emb", 1, 2), ("Adagrad/accumulator/user_emb", 0, 2),
        ("Adagrad/accumulator/user_emb", 1, 2), ("kernel", 0, 1), ("kernel", 0, 1),  # two layers' own
        ("m", 0, 2), ("m", 1, 2), ("m", 0, 2), ("m", 1, 2)]
