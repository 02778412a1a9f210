"""``python -m bench.hosts.soak``'s fault-free run: its report from known figures, and the
options that leave nothing to run (the runs themselves need a lab and minutes)."""

from __future__ import annotations

import pytest

from bench.hosts.soak import SECONDS_PER_FAULT, SIZE_MARGIN, Baseline, fault_free, main, sized_steps
from tests.launch.soak import Fault, FaultKind


def test_the_fault_free_report_names_each_incident_and_retry_and_what_it_broke() -> None:
    clean = fault_free(Baseline(0, 601.4, [], []), 90000, "async")
    assert clean == ["fault-free run, 90000 steps, async: exit 0, wall time 601 s", "incidents: 0",
                     "steps tried again: 0", "promises: all kept"]
    retry = "worker1 | worker1: a step failed as a peer received its request twice; trying again"
    incident = ("restart", "worker1", "exited with code 1 (AbortedError)")
    broken = fault_free(Baseline(1, None, [incident], [retry]), 90000, "sync")
    assert broken[0] == "fault-free run, 90000 steps, sync: exit 1, wall time unknown (no summary)"
    assert "  restart worker1: exited with code 1 (AbortedError)" in broken and f"  {retry}" in broken
    assert broken[-1] == "promises: exit 1; incident: worker1 restart: exited with code 1 (AbortedError)"
    # Stopped after --minutes, as Ctrl-C stops it: exit 130 is what it should end with.
    stopped = fault_free(Baseline(130, 600.2, [], [], stopped=True, global_step=41234), 10**9, "async")
    assert stopped[0] == "fault-free run, stopped at step 41234 as asked, async: exit 130, wall time 600 s"
    assert stopped[-1] == "promises: all kept"


def test_the_soaks_run_is_sized_from_the_fault_free_runs_step_rate() -> None:
    """A quiet machine made 16,000 steps in 114 s: the soak's run of 16,000 ended after its
    second fault of eight. Sized from that rate it outlasts its faults; a slow machine's rate
    keeps the default, and so does a fault-free run that failed or did not say."""
    faults = [Fault(FaultKind.KILL_WORKER, "worker0"), Fault(FaultKind.CUT_HOST, "worker1", 10.0)]
    fast = Baseline(0, 114.0, [], [], global_step=16000)
    expected = round(16000 / 114.0 * (2 * SECONDS_PER_FAULT + 10.0) * SIZE_MARGIN)
    assert sized_steps(4000, fast, faults) == expected > 4000
    slow = Baseline(0, 800.0, [], [], global_step=4000)
    assert sized_steps(4000, slow, faults) == 4000
    assert sized_steps(4000, None, faults) == 4000
    assert sized_steps(4000, Baseline(1, 114.0, [], [], global_step=16000), faults) == 4000


@pytest.mark.parametrize(("argv", "says"), [
    (["--faults", "0", "--no-baseline"], "--no-baseline leaves nothing"),
    (["--faults", "-1"], "--faults must be 0"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--faults", "0", "--minutes", "10", "--steps", "100"], "in place of --steps"),
    (["--minutes", "10"], "for the fault-free run alone")])
def test_options_that_leave_nothing_to_run_are_refused(argv: list[str], says: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and says in capsys.readouterr().err
