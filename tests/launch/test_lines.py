"""The output reader against whatever a task may print."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import protocol
from tui.launch.lines import LineSplitter, OutputBatch, OutputLine, Pace, Stream, read_lines


def split_batches(data: bytes, max_line: int = 1 << 22, chunk: int = 7) -> list[OutputBatch]:
    splitter = LineSplitter(Stream.STDOUT, max_line)
    batches: list[OutputBatch] = []
    for start in range(0, len(data), chunk):
        batches += splitter.feed(data[start:start + chunk])
    return batches + splitter.finish()


def split(data: bytes, max_line: int = 1 << 22, chunk: int = 7) -> list[OutputLine]:
    return [line for batch in split_batches(data, max_line, chunk) for line in batch.each()]


def texts(lines: list[OutputLine]) -> list[str]:
    return [line.text for line in lines]


def test_plain_lines_crlf_and_a_last_line_without_newline() -> None:
    assert texts(split(b"one\ntwo\r\n\nlast")) == ["one", "two", "", "last"]


def test_progress_redrawn_with_carriage_returns_ends_a_line_at_each_one() -> None:
    # tqdm (and Keras' bar) redraw in place with \r and print \n only at the end: each
    # update is a line as it comes, not one line when the loop ends.
    data = b"\r 1/3 loss=0.9\r 2/3 loss=0.5\r 3/3 loss=0.1\nnext\r\nlast\r"
    assert texts(split(data, chunk=len(data))) == [" 1/3 loss=0.9", " 2/3 loss=0.5", " 3/3 loss=0.1", "next",
                                                   "last"]
    for chunk in range(1, 12):
        assert texts(split(data, chunk=chunk)) == texts(split(data, chunk=len(data)))
    splitter = LineSplitter(Stream.STDERR)
    assert texts([line for b in splitter.feed(b"\r 1/3 loss=0.9") for line in b.each()]) == []
    assert texts([line for b in splitter.feed(b"\r 2/3") for line in b.each()]) == [" 1/3 loss=0.9"]
    # A final \r may be the first half of a \r\n: it waits for the next byte.
    assert texts([line for b in splitter.feed(b" loss=0.5\r") for line in b.each()]) == []
    assert texts([line for b in splitter.feed(b"\n") for line in b.each()]) == [" 2/3 loss=0.5"]
    assert texts(split(b"\r\r\n\n")) == ["", ""]  # a line of nothing is still a line


@given(st.text(alphabet=st.sampled_from("ab\r\n\u00e9"), max_size=60), st.integers(min_value=1, max_value=9))
@settings(max_examples=300, deadline=None)
def test_carriage_returns_split_the_same_in_any_chunking(text: str, chunk: int) -> None:
    data = text.encode()
    assert texts(split(data, chunk=chunk)) == texts(split(data, chunk=max(1, len(data))))


def test_invalid_json_and_unknown_events_stay_text() -> None:
    lines = split(b'{"event": "step", "v": 1\n{"event":"nope","v":1,"role":"ps","index":0}\n[1,2]\n')
    assert len(lines) == 3
    assert all(protocol.parse_event(line.text) is None for line in lines)


def test_binary_and_invalid_utf8_are_replaced_not_fatal() -> None:
    lines = split(b"\x00\x01\xff\xfe bin \x80\n\xe2\x82\n")
    assert texts(lines) == ["\x00\x01\ufffd\ufffd bin \ufffd", "\ufffd"]


def test_ansi_escapes_pass_through_untouched() -> None:
    assert texts(split(b"\x1b[31mred\x1b[0m \x1b]0;title\x07\n")) == ["\x1b[31mred\x1b[0m \x1b]0;title\x07"]


def test_a_one_megabyte_line_arrives_whole() -> None:
    lines = split(b"a" * 1_000_000 + b"\nafter\n", chunk=65536)
    assert [len(t) for t in texts(lines)] == [1_000_000, 5]
    assert not any(line.partial for line in lines)


def test_an_over_long_line_is_cut_into_marked_pieces_without_losing_bytes() -> None:
    lines = split(b"x" * 25 + b"\nshort\n", max_line=10)
    assert [(line.text, line.partial, line.continued) for line in lines] == [
        ("x" * 10, True, False), ("x" * 10, True, True), ("x" * 5, False, True),
        ("short", False, False)]


def test_pieces_never_split_a_utf8_character() -> None:
    text = "é" * 20  # two bytes each
    lines = split(text.encode(), max_line=7)
    assert "".join(texts(lines)) == text
    assert "\ufffd" not in "".join(texts(lines))


def test_one_read_of_many_lines_is_one_batch() -> None:
    data = b"".join(b"%03d\n" % n for n in range(500))
    (batch,) = split_batches(data, chunk=len(data))
    assert batch.lines == tuple(f"{n:03d}" for n in range(500))
    assert not batch.continued and not batch.partial


def test_a_piece_of_an_over_long_line_only_ends_or_starts_a_batch() -> None:
    batches = split_batches(b"ab\n" + b"x" * 25 + b"\nshort\n", max_line=10, chunk=1000)
    assert [(b.lines, b.continued, b.partial) for b in batches] == [
        (("ab", "x" * 10), False, True), (("x" * 10,), True, True), (("x" * 5, "short"), True, False)]
    assert [b.is_piece(i) for b in batches for i in range(len(b.lines))] == [False, True, True, True, False]


def test_events_are_parsed_from_lines() -> None:
    event = protocol.Ready(role="ps", index=0, pid=1, address="localhost:1")
    (line,) = split((event.to_json() + "\n").encode())
    assert protocol.parse_event(line.text) == event


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=300),
       st.integers(min_value=1, max_value=50), st.integers(min_value=4, max_value=40))
@settings(max_examples=300, deadline=None)
def test_any_text_any_chunking_is_reassembled_exactly(text: str, chunk: int, max_line: int) -> None:
    rebuilt = ""
    for line in split(text.encode(), max_line=max_line, chunk=chunk):
        rebuilt += line.text if line.partial else line.text + "\n"
    expected = text if text.endswith("\n") or not text else text + "\n"
    assert rebuilt == expected


@given(st.binary(max_size=500), st.integers(min_value=1, max_value=64))
@settings(max_examples=300, deadline=None)
def test_any_bytes_never_raise(data: bytes, chunk: int) -> None:
    lines = split(data, max_line=16, chunk=chunk)
    whole = [line for line in lines if not line.partial]
    if b"\r" not in data:  # (a \r may end a line too: the test above)
        assert len(whole) == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


class ChunkSource:
    """An async byte source returning fixed chunks, then EOF."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def read(self, n: int = -1) -> bytes:
        await asyncio.sleep(0)
        return self._chunks.pop(0) if self._chunks else b""


async def test_read_lines_from_an_async_source() -> None:
    source = ChunkSource([b"par", b"tial\nnext", b" line", b""])
    lines = [line async for line in read_lines(source, Stream.STDERR)]
    assert lines == [OutputLine(Stream.STDERR, "partial"), OutputLine(Stream.STDERR, "next line")]


def test_a_trickle_gathers_between_reads_and_a_flood_never_waits() -> None:
    pace = Pace(gather=0.02)
    # A line a millisecond: after the first, each read waits, so the next one takes twenty
    # lines at once.
    assert [pace.wait_after(100, t / 1000) for t in range(0, 100, 20)] == [0.0] + [0.02] * 4
    # Small reads at 4 MB/s: once a window has shown the rate, none waits (the pipe must
    # not fill while the controller sleeps).
    flood = [pace.wait_after(2048, 0.1 + n * 0.0005) for n in range(100)]
    assert flood[0] == 0.02 and not any(flood[60:])
    # Quiet for most of a second: its bytes over that time are a trickle again.
    assert [pace.wait_after(100, t) for t in (1.0, 1.02, 1.04)] == [0.02] * 3
    # A read that took all it asked for, or a big one, leaves more behind: no wait.
    assert pace.wait_after(65536, 1.05, full=True) == pace.wait_after(8192, 1.06) == 0.0


def test_a_slow_trickle_never_waits_to_gather() -> None:
    pace = Pace(gather=0.02)
    # A line every 200 ms: each read waited longer than a gathering time for its line, so a
    # wait after it would gather nothing (and cost a timer and a wake-up per line).
    assert [pace.wait_after(100, 1.0 + n * 0.2, waited=0.19) for n in range(5)] == [0.0] * 5
    # Lines coming faster than that (the read found its bytes at once) still gather.
    assert pace.wait_after(100, 2.0, waited=0.001) == 0.02
