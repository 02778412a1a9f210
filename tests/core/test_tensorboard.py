"""tui.core.tensorboard and the session that owns it: a real TensorBoard answers on the port it
picked, shows one run or several side by side, and is gone once closed; ``--tensorboard``
starts it with the run and it ends with the controller, also when the controller is
interrupted."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support import async_wait_until
from tests.support.clirun import REPO, TAG_ENV, read_json_until, start_controller, tagged_env
from tui.core.tensorboard import TensorBoard, TensorBoardError

pytestmark = pytest.mark.integration


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


async def fetch(url: str) -> tuple[int, bytes]:
    return await asyncio.to_thread(get, url)


async def refused(url: str) -> bool:
    try:
        await fetch(url)
    except (urllib.error.URLError, ConnectionError):
        return True
    return False


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_tensorboard_answers_for_one_run_then_several_and_is_gone_after_close(tmp_path: Path) -> None:
    first, second = tmp_path / "20261127-010101-aaaaaa", tmp_path / "20261127-020202-bbbbbb"
    first.mkdir()
    second.mkdir()
    board = TensorBoard()
    try:
        one = await board.open([first])
        assert one.url.startswith("http://127.0.0.1:")
        status, page = await fetch(one.url)
        assert status == 200 and b"<html" in page.lower()
        _, environment = await fetch(one.url + "data/environment")
        assert json.loads(environment)["data_location"] == str(first)
        assert await board.open([first]) == one  # the same runs: the same TensorBoard

        both = await board.open([first, second])  # other runs: it is replaced
        assert both.pid != one.pid and gone(one.pid) and await refused(one.url)
        _, environment = await fetch(both.url + "data/environment")
        location = json.loads(environment)["data_location"]
        assert f"{first.name}:{first}" in location and f"{second.name}:{second}" in location
    finally:
        await board.close()
    assert gone(both.pid) and await refused(both.url)
    assert board.board is None


async def test_no_run_directory_is_a_clear_error() -> None:
    with pytest.raises(TensorBoardError, match="no run directory"):
        await TensorBoard().open([])


async def test_headless_tensorboard_flag_starts_it_with_the_run_and_it_ends_with_the_controller(
        tmp_path: Path) -> None:
    """A run that trains until stopped; TensorBoard's address comes as a notice and answers;
    SIGINT ends the controller (130) and TensorBoard with it."""
    tag, env = tagged_env(FAKE_FOREVER="worker0")
    controller = await start_controller(
        [str(REPO / "hosts.yaml"), "--json", "--tensorboard", "--run-dir", str(tmp_path / "runs")],
        env, tmp_path, fake=True)
    try:
        records = await read_json_until(controller, lambda r: "TensorBoard at " in str(r.get("text")), 180)
        text = records[-1]["text"]
        url = text.split("TensorBoard at ", 1)[1].split()[0]
        (run_dir,) = (tmp_path / "runs").iterdir()
        assert text.endswith(f"for {run_dir.name}")
        status, _ = await fetch(url)
        assert status == 200
        boards = [p for p in psutil.Process(controller.pid).children(recursive=True)
                  if "tensorboard.main" in " ".join(p.cmdline()) and p.environ().get(TAG_ENV) == tag]
        assert len(boards) == 1
        controller.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(controller.wait(), 120) == 130
        await async_wait_until(lambda: gone(boards[0].pid), 30, what="TensorBoard to end with the controller")
        assert await refused(url)
    finally:
        if controller.returncode is None:
            controller.kill()
            await controller.wait()
