"""One timer for every host's beats and looks (tui.launch.ssh.host_link.LinkTicks), with
stand-in links that count what they are asked (the real keeper: tests/launch/test_host_link.py).
A timer of their own per host woke an idle controller of 64 hosts some 190 times a second;
the ticks are one task whatever the count, each link looked at every tick and beaten every
other, and the task ends with the last link."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from tests.support import async_wait_until
from tui.launch.ssh.host_link import BEAT_INTERVAL, LOOK_INTERVAL, LinkTicks, SSHHostLink

pytestmark = pytest.mark.timeout(60)


class Counting:
    """What the ticks call on a link, counted."""

    def __init__(self) -> None:
        self.beats = 0
        self.looks = 0

    def beat(self) -> None:
        self.beats += 1

    def look(self) -> None:
        self.looks += 1


def tick_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "host links"]


async def test_every_link_is_beaten_and_looked_at_by_one_timer() -> None:
    ticks = LinkTicks()
    links = [Counting() for _ in range(64)]
    for link in links:
        ticks.add(cast(SSHHostLink, link))
    assert len(tick_tasks()) == 1
    await async_wait_until(lambda: all(link.beats >= 3 for link in links), 30.0, what="three beats each")
    per_beat = round(BEAT_INTERVAL / LOOK_INTERVAL)
    for link in links:
        # Each tick looks at every link, and every other tick beats it too: the same turn.
        assert link.beats == links[0].beats
        assert link.looks // per_beat == link.beats
    assert len(tick_tasks()) == 1

    for link in links[1:]:
        ticks.discard(cast(SSHHostLink, link))
    beats = links[1].beats
    await async_wait_until(lambda: links[0].beats >= beats + 2, 30.0, what="two more beats of the first")
    assert all(link.beats == beats for link in links[1:])  # (none after it left)
    ticks.discard(cast(SSHHostLink, links[0]))
    await async_wait_until(lambda: not tick_tasks(), 10.0, what="the timer's end")

