"""A local task's output pipes: wide enough that a flooding task keeps writing while the
controller is off the CPU for a moment."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tui.launch.local.pipes import PIPE_BYTES, output_pipe


def test_an_output_pipe_holds_a_mebibyte_before_its_writer_waits() -> None:
    if int(Path("/proc/sys/fs/pipe-max-size").read_text()) < PIPE_BYTES:
        pytest.skip("this system caps pipes below a mebibyte")
    read_end, write_end = output_pipe()
    try:
        os.set_blocking(write_end, False)
        written = 0
        with contextlib.suppress(BlockingIOError):
            while written < 2 * PIPE_BYTES:
                written += os.write(write_end, b"x" * 4096)
        # A default pipe takes 64 KiB; this one takes everything up to its width.
        assert written == PIPE_BYTES
    finally:
        os.close(read_end)
        os.close(write_end)
