"""tui.plan.check_report: every problem a typed record, the same in the lines and in --json."""

from __future__ import annotations

import json

from tui.launch.look import CopyFinding, CopyState
from tui.plan.check_report import CheckReport, HostCheck, Problem, ProblemKind


def test_problems_are_typed_records_in_json_and_lines() -> None:
    copy = CopyFinding("trainer", "/w/trainer-0123456789ab", CopyState.CHANGED, 10, "f.py differs")
    report = CheckReport(
        hosts=(HostCheck("h0", ("ps0",), offers="2 cores, no GPU", shares={"ps0": "2 cores"},
                         ps_bytes={"ps0": 3072}),
               HostCheck("h1", ("worker0",), copies=(copy,),
                         problems=(Problem(ProblemKind.COPY, copy.describe(), "h1"),))),
        placement="greedy, 1 partition(s)",
        plan_problems=(Problem(ProblemKind.PLAN, "host h0: tasks ask for 1 GPU but it has 0"),))
    document = json.loads(report.to_json())
    assert document["ok"] is False
    assert document["problems"] == [
        {"host": "h1", "kind": "copy", "message": "/w/trainer-0123456789ab: f.py differs"},
        {"host": None, "kind": "plan", "message": "host h0: tasks ask for 1 GPU but it has 0"}]
    assert document["hosts"][1]["copies"][0]["state"] == "changed"
    assert document["hosts"][0]["ps_bytes"] == {"ps0": 3072}
    assert [str(p) for p in report.problems] == ["h1: /w/trainer-0123456789ab: f.py differs",
                                                 "host h0: tasks ask for 1 GPU but it has 0"]
    lines = report.lines()
    assert lines[0].startswith("h0           ok       tasks ps0; 2 cores, no GPU")
    assert f"{'':<12} shares ps0 2 cores" in lines and f"{'':<12} holds ps0 3.0 KiB (100%)" in lines
    assert f"{'':<12} - /w/trainer-0123456789ab: f.py differs" in lines
    assert lines[-1] == "2 problems: the run would not start"
