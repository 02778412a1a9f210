"""The Throughput pane's step anatomy, driven by Pilot over a scripted core: it says this
run's steps only (a relaunch starts it afresh), and names a TF2 coordinator's slow worker."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static, TabbedContent

from tests.app.scripted import T0, TASKS, feed, running_history, scripted
from trainer import protocol
from tui.app.app import TfdistApp
from tui.core.anatomy import WINDOW
from tui.core.events import ControllerEvent, RunStarted, TrainerEvent
from tui.core.options import RunOptions

SIZE = (120, 40)


def anatomy_shown(app: TfdistApp) -> str:
    """The anatomy's lines as the pane has them; empty when its heading is hidden."""
    if not app.query_one("#anatomy-title", Static).display:
        return ""
    return str(app.query_one("#anatomy-text", Static).content)


async def test_a_relaunch_shows_no_typical_step_of_the_run_before(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(TabbedContent).active = "throughput"
        await feed(app, core, pilot, [])
        assert "a typical step: 12.00 ms a step" in anatomy_shown(app)
        # Relaunched (say with another fuse setting): none of the last run's samples may
        # stand for this one's steps.
        await feed(app, core, pilot, [RunStarted(run_id="20270115-094000-def456", run_dir=Path("runs/y"),
                                                 tasks=TASKS, settings=options.config.training, t=T0 + 50)])
        assert anatomy_shown(app) == ""


def coordinator(by_worker: tuple[float, ...], t: float) -> TrainerEvent:
    parts = (protocol.AnatomyPart(part="queued", seconds=0.05, share=0.5),
             protocol.AnatomyPart(part="function", seconds=0.05, share=0.5))
    return TrainerEvent(task="chief0", t=t, event=protocol.StepAnatomy(
        role="chief", index=0, t=t, global_step=1000, local_step=100, seconds=0.1, parts=parts,
        every=128, coordinator=True, by_worker=by_worker))


async def test_a_tf2_coordinators_slow_worker_is_named_on_the_pane(options: RunOptions) -> None:
    """Seen in tmux: worker1 pinned beside busy loops, its functions ~2x worker0's, never named
    (only workers' own step reports were judged, and under a coordinator there are none)."""
    app, core = scripted(options, [])
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(TabbedContent).active = "throughput"
        events: list[ControllerEvent] = [coordinator((0.07, 0.15), T0 + n) for n in range(WINDOW)]
        await feed(app, core, pilot, events)
        shown = anatomy_shown(app)
        # Only the coordinator's view: the heading promises no worker's step statistics.
        assert str(app.query_one("#anatomy-title", Static).content) == \
            "step anatomy (a TF2 coordinator's functions as it sees them)"
        assert "(worker0 70.00 ms, worker1 150.00 ms)" in shown
        assert "worker1 is a straggler: 150.00 ms a function against 70.00 ms typical (worker0)" in shown


def sampled(index: int, seconds: float, rest: float, read: float, t: float) -> TrainerEvent:
    parts = (protocol.AnatomyPart(part="compute", seconds=seconds * 0.01, share=0.01),
             protocol.AnatomyPart(part="read", ps=0, seconds=seconds * read, share=read),
             protocol.AnatomyPart(part="rest", seconds=seconds * rest, share=rest))
    return TrainerEvent(task=f"worker{index}", t=t, event=protocol.StepAnatomy(
        role="worker", index=index, t=t, global_step=2000 + index, local_step=1000, seconds=seconds,
        parts=parts, every=200, cost=0.004))


def stepped(index: int, seconds: float, t: float) -> TrainerEvent:
    return TrainerEvent(task=f"worker{index}", t=t, event=protocol.Step(
        role="worker", index=index, t=t, global_step=2000, local_step=1000, loss=0.1,
        examples_per_sec=64 / seconds, step_time=seconds, target=200_000))


async def test_a_straggler_is_set_beside_its_peer_in_milliseconds(options: RunOptions) -> None:
    """Seen in tmux: worker1 starved of CPU (a capped group with busy loops), 140.58 ms a step
    against worker0's 48.64 ms, read "its step rest 85% · read ps0 11%, worker0's rest 57% ·
    read ps0 29%": its reads looked faster than its peer's, though they took as long. In
    milliseconds the extra time is where it is: the rest, not the link."""
    app, core = scripted(options, [])
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(TabbedContent).active = "throughput"
        events: list[ControllerEvent] = [sampled(0, 0.04864, 0.57, 0.29, T0),
                                         sampled(1, 0.14058, 0.85, 0.11, T0)]
        for n in range(WINDOW):
            events += [stepped(0, 0.0315, T0 + n), stepped(1, 0.0929, T0 + n)]
        await feed(app, core, pilot, events)
        shown = anatomy_shown(app).replace("\n", " ")
        assert ("worker1 is a straggler: 92.90 ms a step against 31.50 ms typical (worker0); its step "
                "140.58 ms: rest 119.49 ms · read ps0 15.46 ms, worker0's 48.64 ms: rest 27.72 ms · "
                "read ps0 14.11 ms; most of the difference: rest (+91.77 ms)") in shown, shown
