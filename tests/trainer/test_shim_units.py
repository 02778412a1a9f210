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
