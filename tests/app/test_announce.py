"""The app's toasts (tui.app.announce): a warning goes when its cause does."""

from __future__ import annotations

from tests.app.scripted import T0, feed, running_history, scripted
from tui.core.events import Level, Notice

SIZE = (120, 40)


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_an_unreachable_hosts_warning_goes_when_it_answers_again(options) -> None:
    # Seen on the lab: "host h2 ... unreachable" stayed its full time after "host h2 answers
    # again": a warning on screen whose cause was gone.
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        other = Notice(level=Level.WARNING, text="stalled: worker0", task="worker0", t=T0 + 41)
        cut = Notice(level=Level.WARNING, text="host h2 (10.0.0.2) unreachable: no answer for 5 s",
                     about="host h2", t=T0 + 41)
        await feed(app, core, pilot, [other, cut])
        assert any("host h2 (10.0.0.2) unreachable" in text for text in toasts(app)), toasts(app)
        back = Notice(level=Level.INFO, text="host h2 answers again after 12 s; worker1 carries on",
                      about="host h2", t=T0 + 53)
        await feed(app, core, pilot, [back])
        await pilot.pause()
        shown = toasts(app)
        assert not any("unreachable" in text for text in shown), shown
        # Replaced by what is true now; a warning about something else stays.
        assert any("answers again" in text for text in shown) and "stalled: worker0" in shown, shown
        # A notice about nothing on screen says nothing new at INFO (the log has it).
        await feed(app, core, pilot, [Notice(level=Level.INFO, text="host h3 answers again",
                                             about="host h3", t=T0 + 54)])
        await pilot.pause()
        assert not any("host h3" in text for text in toasts(app)), toasts(app)
        assert any("host h3 answers again" in line for line in app.dashboard.merged.lines)
