"""A local task's pipes read straight into line batches (tui.launch.local.pipe_output), both ways:
pulled (``batches``, what ``output()`` gives) and handed to a handler from the read
(``hand``, what the supervisor uses): every line, each on its stream, in order, the last one
without its newline too, however much comes at once."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import Callable

import pytest

from tui.launch.lines import OutputBatch, Stream
from tui.launch.local.pipe_output import PipeOutput
from tui.launch.local.pipes import output_pipe

pytestmark = pytest.mark.timeout(60)


async def read_from(script: str, how: str, handle: Callable[[OutputBatch], None] | None = None,
                    ) -> tuple[list[OutputBatch], int]:
    """The batches of a child running ``script`` (read ``how``: pull or hand, to ``handle`` if
    given), and its exit code."""
    pipes = [output_pipe(), os.pipe()]  # a wide stdout, a narrow stderr
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", textwrap.dedent(script),
                                                 stdout=pipes[0][1], stderr=pipes[1][1])
    for _, write_end in pipes:
        os.close(write_end)
    output = await PipeOutput.open(pipes[0][0], pipes[1][0])
    batches: list[OutputBatch] = []
    if how == "pull":
        batches = [batch async for batch in output.batches()]
    else:
        try:
            await asyncio.wait_for(output.hand(handle or batches.append), 30)
        finally:
            await child.wait()
    return batches, await child.wait()


def lines_of(batches: list[OutputBatch], stream: Stream) -> list[str]:
    return [line for batch in batches if batch.stream is stream for line in batch.lines]


@pytest.mark.parametrize("how", ["pull", "hand"])
async def test_both_streams_arrive_whole_and_the_last_line_without_its_newline(how: str) -> None:
    batches, code = await read_from("""
        import sys
        print("out 1", flush=True)
        sys.stderr.write("err 1\\nerr 2\\n")
        sys.stderr.flush()
        sys.stdout.write("out 2\\nno newline")
        sys.exit(3)
    """, how)
    assert code == 3
    assert lines_of(batches, Stream.STDOUT) == ["out 1", "out 2", "no newline"]
    assert lines_of(batches, Stream.STDERR) == ["err 1", "err 2"]
    assert all(batch.lines and not batch.partial and not batch.continued for batch in batches)


@pytest.mark.parametrize("how", ["pull", "hand"])
async def test_a_flood_on_both_streams_arrives_in_order_a_read_at_a_time(how: str) -> None:
    # Megabytes on each stream, faster than they are read: the reader takes a read's worth
    # (64 KiB) at a time, and a pipe whose bytes wait unread is paused until it catches up.
    batches, code = await read_from("""
        import sys
        for n in range(60000):
            sys.stdout.write(f"out line {n:06d} " + "x" * 40 + "\\n")
            if n % 10 == 0:
                sys.stderr.write(f"err line {n:06d}\\n")
    """, how)
    assert code == 0
    assert lines_of(batches, Stream.STDOUT) == [f"out line {n:06d} " + "x" * 40 for n in range(60000)]
    assert lines_of(batches, Stream.STDERR) == [f"err line {n:06d}" for n in range(0, 60000, 10)]
    # (A read's bytes, and the start of its first line that the read before brought.)
    assert max(sum(len(line) + 1 for line in batch.lines) for batch in batches) <= 64 * 1024 + 60


async def test_a_handler_that_fails_ends_the_reading_with_its_error() -> None:
    def handle(batch: OutputBatch) -> None:
        raise ValueError(f"cannot take {batch.lines[0]}")

    with pytest.raises(ValueError, match="cannot take first"):
        await read_from("print('first', flush=True)", "hand", handle)
