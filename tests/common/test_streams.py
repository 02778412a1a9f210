"""The controller's own output streams: a batched writer gathers text, in order, until a
flush, and writes it in one go; a surviving stream says once that its reader is gone."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

from tui.common.streams import BatchedWriter, SurvivingStream, reader_gone


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.written = asyncio.Event()

    def write(self, text: str) -> int:
        self.writes += 1
        self.written.set()
        return super().write(text)


async def test_text_gathers_until_the_tick_and_goes_out_in_one_write_in_order() -> None:
    stream = CountingStream()
    writer = BatchedWriter(stream, every=0.01)
    for n in range(100):
        writer.write(f"worker{n} | step {n}\n")
        writer.flush_soon()
    assert stream.getvalue() == ""  # nothing yet: the tick has not come
    await asyncio.wait_for(stream.written.wait(), 5)
    assert stream.getvalue() == "".join(f"worker{n} | step {n}\n" for n in range(100))
    assert stream.writes == 1
    # A flush writes what is gathered at once (another line's order is kept), and the
    # tick it makes redundant writes nothing more.
    writer.write("a\n")
    writer.flush_soon()
    writer.write("b\n")
    writer.flush()
    assert stream.getvalue().endswith("step 99\na\nb\n") and stream.writes == 2


def test_without_an_event_loop_a_flush_soon_is_a_flush_now() -> None:
    stream = CountingStream()
    writer = BatchedWriter(stream)
    writer.write("line\n")
    writer.flush_soon()
    assert stream.getvalue() == "line\n"


def test_a_pipe_whose_reader_closed_is_lost_once_without_a_write() -> None:
    read_end, write_end = os.pipe()
    lost: list[bool] = []
    with os.fdopen(write_end, "w") as pipe:
        stream = SurvivingStream(pipe, on_lost=lambda: lost.append(True))
        stream.write("seen\n")
        stream.flush()
        assert not stream.check() and not lost
        os.close(read_end)
        assert stream.check() and lost == [True]
        stream.write("into nothing\n")  # no error, and said only once
        stream.flush()
        assert stream.check() and lost == [True]


def test_a_failed_write_is_a_loss_and_a_file_never_is(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    lost: list[bool] = []
    with os.fdopen(write_end, "w") as pipe:
        stream = SurvivingStream(pipe, on_lost=lambda: lost.append(True))
        stream.write("x" * 100_000)  # more than the buffer: written now, EPIPE
        stream.flush()
        assert lost == [True] and stream.lost
    with (tmp_path / "out").open("w") as file:
        assert not reader_gone(file)
    assert not reader_gone(io.StringIO())
