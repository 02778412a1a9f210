"""The paced event loop: input that trickles in is handled a tick's worth per wake-up, in
order and complete, and work at hand is never held back."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from tui.common.paced_loop import PacedSelector, paced_loop


def test_a_trickle_is_read_a_tick_at_a_time_complete_and_in_order() -> None:
    loop = paced_loop(tick=0.05)
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    messages = [f"line {n}\n".encode() for n in range(60)]
    got: list[bytes] = []
    wakes = 0

    def readable() -> None:
        nonlocal wakes
        wakes += 1
        got.append(reader.recv(65536))
        if b"".join(got) == b"".join(messages):
            loop.stop()

    def trickle() -> None:  # the input: a line every 5 ms, as a busy task prints them
        for message in messages:
            writer.send(message)
            time.sleep(0.005)

    loop.add_reader(reader.fileno(), readable)
    thread = threading.Thread(target=trickle)
    try:
        thread.start()
        loop.call_later(30, loop.stop)  # (a bound, should the lines never all come)
        loop.run_forever()
    finally:
        thread.join()
        loop.close()
        reader.close()
        writer.close()
    assert b"".join(got) == b"".join(messages)
    # 60 lines over ~0.3 s: a plain loop wakes for (nearly) each, a paced one once a tick.
    assert wakes <= 0.3 / 0.05 + 4, wakes


async def chain(n: int) -> int:
    for _ in range(n):
        await asyncio.sleep(0)
    return n


def test_work_at_hand_and_timers_are_not_held() -> None:
    selector = PacedSelector(tick=10.0)
    loop = asyncio.SelectorEventLoop(selector)
    try:
        begin = time.monotonic()
        assert loop.run_until_complete(chain(200)) == 200
        loop.run_until_complete(asyncio.sleep(0.05))  # a timer comes when it is due
        assert time.monotonic() - begin < 5
    finally:
        loop.close()
