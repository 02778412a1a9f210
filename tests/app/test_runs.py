"""The Runs pane on its own: this config's past runs (sweep points included), selected with
space and compared with ``c``; and the measured-traffic bars of the Placement pane."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from tests.support.runfixtures import write_run
from tui.app.runs import RunsView, traffic_chart
from tui.core.traffic import PsTraffic, TrafficSample


class RunsApp(App[None]):
    def __init__(self, root: Path, config: Path) -> None:
        super().__init__()
        self.root = root
        self.config = config

    def compose(self) -> ComposeResult:
        yield RunsView(self.root, self.config, id="runs")


@pytest.mark.asyncio
async def test_space_selects_runs_and_c_compares_them(tmp_path: Path) -> None:
    config = tmp_path / "hosts.yaml"
    root = tmp_path / "runs"
    write_run(root, "20240101-000001-aaaaaa", "async", (100.0, 300.0), 0.25, 0.9, None, config)
    write_run(root / "sweep-1" / "000-mode_sync-r1", "20240101-000002-bbbbbb", "sync", (50.0, 70.0),
              0.5, 0.75, None, config)
    write_run(root, "20240101-000003-cccccc", "sync", (1.0, 1.0), 0.1, 0.1, None, tmp_path / "other.yaml")
    app = RunsApp(root, config)
    async with app.run_test(size=(200, 50)) as pilot:
        view = app.query_one(RunsView)
        table = view.query_one("#runs-table", DataTable)
        assert table.row_count == 0  # nothing read before the pane is opened
        view.action_reload_runs()  # (the app does this when the pane is shown)
        await app.workers.wait_for_complete()
        await pilot.pause()
        # Newest first; the other config's run is not listed.
        assert [str(k.value) for k in table.rows] == ["20240101-000002-bbbbbb", "20240101-000001-aaaaaa"]
        table.focus()
        await pilot.press("space", "down", "space")
        assert view.selected == ["20240101-000002-bbbbbb", "20240101-000001-aaaaaa"]
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = str(view.query_one("#runs-comparison", Static).render())
        assert "mode=async" in shown and "mode=sync" in shown and "0.7500" in shown
        assert view.last_page == root / "comparison.html"
        assert view.last_page.read_text().count("<svg") == 2
        await pilot.press("space")  # unselect the second run
        assert view.selected == ["20240101-000002-bbbbbb"]


def test_traffic_bars_show_measured_and_expected_rates() -> None:
    assert "no samples yet" in traffic_chart(None, []).plain
    sample = TrafficSample(1.0, 10, (PsTraffic("ps0", 512.0, 512.0, 0, 0),
                                     PsTraffic("ps1", 3072.0, 3072.0, 0, 0)))
    text = traffic_chart(sample, [2048.0, None], width=10).plain
    assert text.splitlines() == ["measured traffic per ps, max/mean 1.71",
                                 "ps0  ██         1.0 KiB/s (expected 2.0 KiB/s)",
                                 "ps1  ██████████ 6.0 KiB/s"]
