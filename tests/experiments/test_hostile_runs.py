"""Run directories are other people's words: a ``[/]`` (Rich markup) or an escape sequence
in a setting must reach the screen as text, in ``tfdist-tui compare`` and in the app's Runs
pane; and a file an attacker planted where a comparison or a sweep is written (a symbolic
link to a victim file) is never written through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from textual.widgets import DataTable, Static

from tests.app.test_runs import RunsApp
from tests.support.runfixtures import write_run
from tui.app.runs import RunsView
from tui.config.load import load_config
from tui.experiments.sweep import parse_axis, sweep_id

REPO = Path(__file__).resolve().parents[2]
HOSTILE_MODE = "[/] [bold]x\x1b]52;c;UFdORUQ=\x07"


def hostile_runs(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    config = tmp_path / "hosts.yaml"
    root = tmp_path / "runs"
    runs = [write_run(root, "20240101-000001-aaaaaa", HOSTILE_MODE, (100.0, 300.0), 0.25, 0.9, None, config),
            write_run(root, "20240101-000002-bbbbbb", "sync", (50.0, 70.0), 0.5, 0.75, None, config)]
    return config, root, runs


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_compare_shows_markup_as_text_and_writes_no_link(tmp_path: Path) -> None:
    _, root, runs = hostile_runs(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (root / "comparison.html").symlink_to(victim)  # planted
    result = cli("compare", *map(str, runs))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "mode=[/] [bold]x" in result.stdout and "\x1b" not in result.stdout
    assert victim.read_text() == "precious\n"
    page = root / "comparison.html"
    assert not page.is_symlink() and "<svg" in page.read_text()


@pytest.mark.asyncio
async def test_c_in_the_runs_pane_compares_hostile_runs_without_crashing(tmp_path: Path) -> None:
    config, root, _ = hostile_runs(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (root / "comparison.html").symlink_to(victim)
    app = RunsApp(root, config)
    async with app.run_test(size=(200, 50)) as pilot:
        view = app.query_one(RunsView)
        # The pane lists (when opened) and compares on workers: wait for each, not for a time.
        view.action_reload_runs()
        await app.workers.wait_for_complete()
        await pilot.pause()
        view.query_one("#runs-table", DataTable).focus()
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = str(view.query_one("#runs-comparison", Static).render())
        assert "mode=[/] [bold]x" in shown and "\x1b" not in shown
    assert victim.read_text() == "precious\n"


def test_a_planted_sweep_folder_is_refused(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({"cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"]},
                                     "run_dir": str(tmp_path / "runs")}))
    config = load_config(hosts)
    folder = tmp_path / "runs" / f"sweep-{sweep_id(config, [parse_axis('mode=sync,async')], 1)}"
    folder.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    result = cli("sweep", str(hosts), "--set", "mode=sync,async")
    assert result.returncode == 2 and "not a folder" in result.stderr, result.stderr[-2000:]
    assert list(elsewhere.iterdir()) == []
