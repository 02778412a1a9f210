"""The app's TensorBoard key: ``t`` asks the core for TensorBoard for the run, or on the Runs
tab for the runs selected there; in a real tmux its address shows on screen and answers, and
quitting the app ends it (tasks are tests/support/fake_trainer.py: this is about
TensorBoard, not training)."""

from __future__ import annotations

import shlex
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from textual.widgets import DataTable, TabbedContent

from tests.app.scripted import scripted
from tests.app.test_tmux import Tmux
from tests.support import async_wait_until, wait_until
from tests.support.clirun import FAKE_CLI, REPO
from tests.support.clirun import write_hosts as write_fake_hosts
from tests.support.runfixtures import write_run
from tui.app.runs import RunsView
from tui.core.commands import OpenTensorBoard
from tui.core.options import RunOptions


def listening_pid(port: int) -> int | None:
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
            return connection.pid
    return None


def refused(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=10).close()
    except (urllib.error.URLError, ConnectionError):
        return True
    return False


async def test_the_key_asks_for_this_run_and_on_the_runs_tab_for_the_selected_runs(
        options: RunOptions) -> None:
    root, config = options.runs_root, options.config.path
    first = write_run(root, "20240101-000001-aaaaaa", "async", (100.0, 300.0), 0.25, 0.9, None, config)
    second = write_run(root, "20240101-000002-bbbbbb", "sync", (50.0, 70.0), 0.5, 0.75, None, config)
    app, core = scripted(options, [])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        assert core.commands == [OpenTensorBoard(())]  # the core knows the current run
        app.query_one(TabbedContent).active = "runs"
        view = app.query_one(RunsView)  # (the app lists the runs as the tab shows)
        await async_wait_until(lambda: len(view.records) == 2, 60, what="the runs listed", pause=pilot.pause)
        view.query_one("#runs-table", DataTable).focus()
        await pilot.press("space", "down", "space", "t")
        assert core.commands[-1] == OpenTensorBoard((first, second))


@pytest.mark.integration
@pytest.mark.tmux
def test_the_tensorboard_key_opens_it_for_the_run_and_quitting_ends_it(tmp_path: Path) -> None:
    hosts = write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    status = tmp_path / "exit-status"
    environment = shlex.join([f"PYTHONPATH={REPO}", "FAKE_FOREVER=*", f"FAKE_DIR={tmp_path}"])
    command = (f"env {environment} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_CLI))} "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}; exec sleep 300")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", size=(160, 40), private=True)
    try:
        tmux.wait_for(r"worker0\s+\S+\s+running\s+\d+w?\s+\d+\s+\d+")  # it trains
        tmux.send("t")
        tmux.send("Tab")  # the All logs pane, which keeps every notice
        found = tmux.wait_for(r"TensorBoard at (http://127\.0\.0\.1:(\d+)/) for", 180)
        url, port = found.group(1), int(found.group(2))
        (run_dir,) = (tmp_path / "runs").iterdir()
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        pid = listening_pid(port)
        assert pid is not None
        board = psutil.Process(pid)
        assert "tensorboard.main" in " ".join(board.cmdline()) and str(run_dir) in board.cmdline()
        tmux.quit_app(status)
    finally:
        tmux.close()
    assert status.read_text().strip() == "130"
    wait_until(lambda: not board.is_running() or board.status() == psutil.STATUS_ZOMBIE, 30,
               what="TensorBoard to end with the app")
    assert refused(url)
