"""The step anatomy board both front ends show: each worker's latest sampled step, and the
straggler named with its anatomy beside a typical worker's; headless and the app fed the
same events show the same lines."""

from __future__ import annotations

import io
import random
import statistics
from pathlib import Path

import pytest

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.state import Dashboard
from tui.core.anatomy import KEEP_FACTOR, SLOW_FACTOR, WINDOW, AnatomyBoard, typical_text
from tui.core.events import RunOutcome, RunSummary, TrainerEvent
from tui.headless import Printer


def anatomy(index: int, seconds: float, compute: float, read: float) -> protocol.StepAnatomy:
    rest = 1.0 - compute - read
    parts = (protocol.AnatomyPart(part="compute", seconds=seconds * compute, share=compute),
             protocol.AnatomyPart(part="input", seconds=0.0, share=0.0),
             protocol.AnatomyPart(part="read", ps=0, seconds=seconds * read, share=read),
             protocol.AnatomyPart(part="push", ps=0, seconds=0.0, share=0.0),
             protocol.AnatomyPart(part="rest", seconds=seconds * rest, share=rest))
    return protocol.StepAnatomy(role="worker", index=index, global_step=100, local_step=50,
                                seconds=seconds, parts=parts, every=200, cost=0.004)


def step(index: int, step_time: float) -> protocol.Step:
    return protocol.Step(role="worker", index=index, global_step=1, local_step=1, loss=1.0,
                         examples_per_sec=64 / step_time, step_time=step_time)


def events(slow: bool) -> list[TrainerEvent]:
    """Two workers' anatomies, then a window of steps: worker1 at 4x worker0's step if slow."""
    found = [TrainerEvent(task="worker0", event=anatomy(0, 0.003, 0.2, 0.5)),
             TrainerEvent(task="worker1", event=anatomy(1, 0.012, 0.7, 0.1))]
    for _ in range(WINDOW):
        found += [TrainerEvent(task="worker0", event=step(0, 0.003)),
                  TrainerEvent(task="worker1", event=step(1, 0.012 if slow else 0.0035))]
    return found


def test_a_worker_well_above_its_peers_is_named_with_both_anatomies() -> None:
    board = AnatomyBoard()
    for event in events(slow=True):
        board.fold(event.task, event.event)
    (straggler,) = board.stragglers
    assert (straggler.task, straggler.typical_task) == ("worker1", "worker0")
    lines = board.lines()
    assert lines[0] == "worker0: step 100, 3.00 ms: read ps0 50% · rest 30% · compute 20%"
    assert lines[-1] == ("worker1 is a straggler: 12.00 ms a step against 3.00 ms typical (worker0); "
                         "its step 12.00 ms: compute 8.40 ms · rest 2.40 ms, worker0's 3.00 ms: "
                         "read ps0 1.50 ms · rest 0.90 ms; most of the difference: compute (+7.80 ms)")
    assert board.news() == ["warning: " + lines[-1]]
    assert board.news() == []  # said once
    # The typical step does not say a faster host would hardly help: worker1's would.
    assert (typical := board.typical()) is not None
    assert typical_text(typical).endswith("; worker1 is a straggler, slower than its peers (see its line)")
    for _ in range(WINDOW):
        board.fold("worker1", step(1, 0.003))
    assert not board.stragglers and board.news() == ["info: worker1 keeps up with its peers again"]
    assert (typical := board.typical()) is not None and "straggler" not in typical_text(typical)


def test_peers_within_the_threshold_and_a_lone_worker_are_never_named() -> None:
    board = AnatomyBoard()
    for event in events(slow=False):
        board.fold(event.task, event.event)
    assert not board.stragglers
    alone = AnatomyBoard()
    for _ in range(2 * WINDOW):
        alone.fold("worker0", step(0, 1.0))
    assert not alone.stragglers


def test_both_front_ends_show_the_same_lines() -> None:
    dashboard = Dashboard(TrainingSettings())
    out = io.StringIO()
    printer = Printer(out, colour=False, anatomy=True)
    for event in events(slow=True):
        dashboard.apply(event)
        printer.handle(event)
    printer.flush()
    text = out.getvalue()
    straggler = dashboard.anatomy.lines()[-1]
    assert f"warning: {straggler}" in text
    assert "worker1 | -- step 100 took 12.00 ms: compute 70% · rest 20% · read ps0 10% " \
           "(1 step in 200 traced, costing 0.4%)" in text
    # Without --anatomy, the samples are not printed; the straggler still is.
    quiet = io.StringIO()
    printer = Printer(quiet, colour=False)
    for event in events(slow=True):
        printer.handle(event)
    printer.flush()
    assert "took" not in quiet.getvalue() and f"warning: {straggler}" in quiet.getvalue()


def test_a_coordinators_functions_are_shown_as_it_sees_them_on_both_screens() -> None:
    """A TF2 coordinator has no step statistics: its line says what it knows (queued, on a
    worker, each worker's mean, retries), that the inside of a function is not seen, and
    gives no worker a figure it does not know."""
    parts = (protocol.AnatomyPart(part="queued", seconds=0.001, share=0.25),
             protocol.AnatomyPart(part="function", seconds=0.003, share=0.75))
    sample = protocol.StepAnatomy(role="chief", index=0, global_step=400, local_step=40, seconds=0.004,
                                  parts=parts, every=40, coordinator=True, by_worker=(0.002, None, 0.004),
                                  retried=2)
    dashboard = Dashboard(TrainingSettings())
    out = io.StringIO()
    printer = Printer(out, colour=False, anatomy=True)
    event = TrainerEvent(task="chief0", event=sample)
    dashboard.apply(event)
    printer.handle(event)
    printer.flush()
    (line,) = dashboard.anatomy.lines()
    assert line == ("chief0: 40 functions to batch 400 as the coordinator sees them, 4.00 ms each from "
                    "schedule to result: queued 25% · on a worker 75% (worker0 2.00 ms, worker2 4.00 ms); "
                    "2 retried; inside a function (compute, reads, pushes) is not seen from the coordinator")
    assert f"chief0 | -- {line.removeprefix('chief0: ')}" in out.getvalue()
    assert "worker1" not in line


def test_the_typical_step_says_where_a_step_went_and_ends_the_summary() -> None:
    """Over every worker's recent samples, each part's median share; when compute is under half
    of it, the line says that the step waits on the rest, not on a faster host. Headless's
    summary ends with it; the app's Throughput pane shows it first."""
    board = AnatomyBoard()
    samples = [("worker0", anatomy(0, 0.004, 0.1, 0.2)), ("worker0", anatomy(0, 0.006, 0.1, 0.3)),
               ("worker1", anatomy(1, 0.005, 0.2, 0.2))]
    for task, sample in samples:
        board.fold(task, sample)
    typical = board.typical()
    assert typical is not None
    assert (typical.samples, typical.workers, typical.seconds) == (3, 2, 0.005)
    assert [name for name, _ in typical.shares] == ["rest", "read ps0", "compute"]
    assert [share for _, share in typical.shares] == pytest.approx([1.9 / 3, 0.7 / 3, 0.4 / 3])
    text = typical_text(typical)
    assert text.startswith("traced 5.00 ms (median of 3 sampled steps, 2 workers): rest 63% · read ps0 23% · "
                           "compute 13%; compute is 13% of a step, so a faster host would hardly help")
    # A step that is mostly compute is not explained away.
    busy = AnatomyBoard()
    busy.fold("worker0", anatomy(0, 0.02, 0.8, 0.1))
    assert (typical_of_busy := busy.typical()) is not None
    assert typical_text(typical_of_busy) == "traced 20.00 ms (median of 1 sampled steps, 1 worker): " \
                                           "compute 80% · read ps0 10% · rest 10%"
    # With step reports (untraced steps), their median comes first.
    for seconds in (0.010, 0.012, 0.016):
        busy.fold("worker0", step(0, seconds))
    assert (reported := busy.typical()) is not None
    assert typical_text(reported).startswith("12.00 ms a step; traced 20.00 ms")
    assert AnatomyBoard().typical() is None

    dashboard = Dashboard(TrainingSettings())
    out = io.StringIO()
    printer = Printer(out, colour=False)
    for task, sample in samples:
        event = TrainerEvent(task=task, event=sample)
        dashboard.apply(event)
        printer.handle(event)
    printer.summary(summary_of_a_run())
    assert f"  a step       {text}\n" in out.getvalue()
    assert dashboard.anatomy.typical() == typical


def test_the_typical_step_and_its_untraced_head_are_of_the_same_steps() -> None:
    """Samples from before the window of step reports whose median heads the line are left
    out: a link's cap lifted, the slow traced samples from under it are not shown beside the
    fast untraced steps after it; with no sample in the window yet, the newest is shown without
    the head, and the next sample brings both back, of the same steps."""
    board = AnatomyBoard()
    for _ in range(3):  # under a cap: 62 ms, mostly reads
        board.fold("worker0", anatomy(0, 0.062, 0.05, 0.8))
        board.fold("worker0", step(0, 0.062))
    assert (capped := board.typical()) is not None
    assert typical_text(capped).startswith("62.00 ms a step; traced 62.00 ms (median of 3 sampled steps")
    for _ in range(WINDOW):  # the cap lifted: a window of 5 ms steps, none sampled
        board.fold("worker0", step(0, 0.005))
    assert (between := board.typical()) is not None
    assert typical_text(between).startswith("traced 62.00 ms (median of 1 sampled steps, 1 worker)")
    assert "a step;" not in typical_text(between)
    board.fold("worker0", anatomy(0, 0.006, 0.4, 0.3))
    board.fold("worker0", step(0, 0.005))
    assert (after := board.typical()) is not None
    assert typical_text(after).startswith("5.00 ms a step; traced 6.00 ms (median of 1 sampled steps")


def summary_of_a_run() -> RunSummary:
    return RunSummary(run_id="r", run_dir=Path("/runs/r"), outcome=RunOutcome.SUCCEEDED, reason="",
                      started_at=0.0, wall_time=1.0, global_step=10, target=10, final_loss=None,
                      final_accuracy=None, tasks=())


def test_a_straggler_hovering_near_the_threshold_keeps_its_name_until_it_is_well_back() -> None:
    """Named above 1.5x its peers' step, cleared only under 1.25x: a worker at 1.4x is not
    named, then cleared, then named again at every other judgement."""
    board = AnatomyBoard()
    for event in events(slow=True):  # worker1 at 4x: named
        board.fold(event.task, event.event)
    assert [s.task for s in board.stragglers] == ["worker1"] and len(board.news()) == 1
    for _ in range(WINDOW):
        board.fold("worker0", step(0, 0.003))
        board.fold("worker1", step(1, 0.0042))  # 1.4x
    assert [s.task for s in board.stragglers] == ["worker1"] and board.news() == []
    for _ in range(WINDOW):
        board.fold("worker1", step(1, 0.0036))  # 1.2x
    assert not board.stragglers and board.news() == ["info: worker1 keeps up with its peers again"]
    fresh = AnatomyBoard()  # 1.4x from the start: never named
    for _ in range(WINDOW):
        fresh.fold("worker0", step(0, 0.003))
        fresh.fold("worker1", step(1, 0.0042))
    assert not fresh.stragglers


def test_a_coordinators_slow_worker_is_named_by_its_function_time() -> None:
    """Under a TF2 coordinator no worker reports a step: each sample's per-worker mean time of
    a function is what a worker is judged by, and the line says it is a function's time."""
    board = AnatomyBoard()
    for n in range(WINDOW):
        board.fold("chief0", coordinator_sample((0.002, 0.0021 if n < WINDOW - 1 else 0.002)))
    assert not board.stragglers
    for _ in range(WINDOW):
        board.fold("chief0", coordinator_sample((0.002, 0.005)))
    (straggler,) = board.stragglers
    assert board.lines()[-1] == "worker1 is a straggler: 5.00 ms a function against 2.00 ms typical (worker0)"
    for _ in range(WINDOW):
        board.fold("chief0", coordinator_sample((0.002, None)))  # a window it ran no function in
    assert board.stragglers == (straggler,)
    for _ in range(WINDOW):
        board.fold("chief0", coordinator_sample((0.002, 0.002)))
    assert not board.stragglers


def coordinator_sample(by_worker: tuple[float | None, ...]) -> protocol.StepAnatomy:
    parts = (protocol.AnatomyPart(part="queued", seconds=0.001, share=0.25),
             protocol.AnatomyPart(part="function", seconds=0.003, share=0.75))
    return protocol.StepAnatomy(role="chief", index=0, global_step=400, local_step=40, seconds=0.004,
                                parts=parts, every=40, coordinator=True, by_worker=by_worker)


def judged_by_every_peer(board: AnatomyBoard, task: str) -> tuple[float, str] | None:
    """What judging ``task`` in a pass over every peer says: the peers' median and, of the
    peers nearest to it, the first seen (None: it keeps up)."""
    peers = {other: s for other, s in board._typical.items() if other != task}
    if not peers:
        return None
    usual = statistics.median(peers.values())
    named = any(s.task == task for s in board.stragglers)
    if board._typical[task] <= (KEEP_FACTOR if named else SLOW_FACTOR) * usual:
        return None
    return usual, min(peers, key=lambda other: abs(peers[other] - usual))


@pytest.mark.parametrize("seed", range(6))
def test_the_ranked_judgement_names_who_a_pass_over_every_peer_names(seed: int) -> None:
    """240 workers' step times, a few slow, many alike (ties): each judged against the sorted
    peers, as fast at any count, names the same straggler, median and nearest peer as a pass
    over every peer."""
    rng = random.Random(seed)
    board = AnatomyBoard()
    workers = rng.choice((2, 3, 17, 240))
    for _ in range(WINDOW + 3):
        for index in range(workers):
            slow = rng.random() < 0.1
            seconds = rng.choice((0.01, 0.02, 0.03)) * (rng.choice((2.0, 4.0)) if slow else 1.0)
            board.fold(f"worker{index}", step(index, seconds))
            for named in (f"worker{index}", *(s.task for s in board.stragglers)):
                if named not in board._typical:
                    continue  # (judged once it has a window of reports)
                found = board._judge(named, "a step")
                expected = judged_by_every_peer(board, named)
                assert (None if found is None else (found.typical_seconds, found.typical_task)) == expected
