"""Sweeps and comparisons as logic: the grid, resuming, reading run directories with known
results. The real runs are in tests/experiments/test_sweep_traffic.py; traffic counters in
tests/core/test_traffic.py."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
from pathlib import Path
from typing import TextIO

import pytest
import yaml

from tests.support.runfixtures import write_run
from tui import cli
from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.experiments.compare import compare, render_html, render_text
from tui.experiments.finished_runs import read_run
from tui.experiments.sweep import (
    PointRunner,
    PointState,
    SweepState,
    grid,
    parse_axis,
    point_config,
    run_points,
)


def test_the_grid_varies_the_first_axis_slowest_and_repeats_each_point(tmp_path: Path) -> None:
    axes = [parse_axis("mode=sync,async"), parse_axis("partitions=1,2")]
    points = grid(axes, repeat=2)
    assert [p.label for p in points[:3]] == ["mode=sync partitions=1 #1", "mode=sync partitions=1 #2",
                                            "mode=sync partitions=2 #1"]
    assert len(points) == 8 and len({p.folder for p in points}) == 8
    for bad in ("mode", "mode=", "=sync", "mode=sync,sync"):
        with pytest.raises(ValueError):
            parse_axis(bad)


def config_with(tmp_path: Path, workers: int = 3) -> ClusterConfig:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({"cluster": {"ps": ["localhost:auto"],
                                                 "worker": ["localhost:auto"] * workers},
                                     "training": {"steps": 10}, "run_dir": str(tmp_path / "runs")}))
    return load_config(hosts)


def test_a_point_uses_the_first_n_workers_and_its_settings(tmp_path: Path) -> None:
    config = config_with(tmp_path)
    (point,) = grid([parse_axis("workers=2"), parse_axis("mode=sync")])
    chosen = point_config(config, point)
    assert [t.name for t in chosen.tasks] == ["ps0", "worker0", "worker1"]
    assert chosen.training.mode.value == "sync"
    for text, message in (("workers=4", "--set workers: expected 1 to 3"),
                          ("mode=fast", "--set mode: expected one of sync, async"),
                          ("stepz=3", "unknown setting --set stepz")):
        with pytest.raises(ConfigError, match=message):
            point_config(config, grid([parse_axis(text)])[0])


def test_an_interrupted_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    config = config_with(tmp_path)
    points = grid([parse_axis("mode=sync,async"), parse_axis("workers=1,2")])
    configs = [point_config(config, p) for p in points]
    ran: list[int] = []
    ids = itertools.count(1)  # run ids sort by start time, as real ones do

    def runner(interrupt_at: int | None, fail_at: int | None) -> PointRunner:
        async def run(point: ClusterConfig, folder: Path, log: TextIO) -> int:
            number = configs.index(point)
            ran.append(number)
            run_dir = folder / f"2024-run-{next(ids)}"
            run_dir.mkdir()
            (run_dir / "events.jsonl").write_text("")
            if number == interrupt_at:
                return ExitCode.INTERRUPTED
            return ExitCode.TASK_FAILED if number == fail_at else ExitCode.OK
        return run

    folder = tmp_path / "sweep"
    out = io.StringIO()
    code = asyncio.run(run_points(SweepState.open(folder, points), configs, runner(2, 1), out))
    assert code == ExitCode.INTERRUPTED and ran == [0, 1, 2]
    saved = json.loads((folder / "sweep.json").read_text())["points"]
    assert [p["state"] for p in saved] == ["succeeded", "failed", "interrupted", "pending"]
    assert saved[0]["run_dir"] == str(folder / points[0].folder / "2024-run-1")

    ran.clear()
    state = SweepState.open(folder, points)
    code = asyncio.run(run_points(state, configs, runner(None, None), out))
    assert code == ExitCode.TASK_FAILED  # point 1 failed earlier and stays failed
    assert ran == [2, 3]
    assert [r.state for r in state.records] == [PointState.SUCCEEDED, PointState.FAILED,
                                                PointState.SUCCEEDED, PointState.SUCCEEDED]
    assert state.records[2].run_dir == str(folder / points[2].folder / "2024-run-4")  # the newer one
    assert "[2/4] mode=sync workers=2: failed earlier, kept" in out.getvalue()


def test_compare_prints_exactly_the_known_figures(tmp_path: Path) -> None:
    one = write_run(tmp_path, "run-a", "async", (100.0, 300.0), 0.25, 0.9, (1024.0, 3 * 1048576.0))
    two = write_run(tmp_path, "run-b", "sync", (50.0, 70.0), 0.5, 0.75, None)
    runs = [read_run(one), read_run(two)]
    assert runs[0].time_to_target == 7.5
    comparison = compare(runs)
    # Only the mode differs (checkpoint_dir differs too, but is a path, not a setting).
    assert comparison.columns[:3] == ("run", "mode", "outcome")
    assert comparison.rows == (
        ("run-a", "async", "succeeded", "12.3", "5.0", "7.5", "0.2500", "0.9000",
         "250.0 (100.0-400.0)", "1.0 KiB / 3.0 KiB", "1.0 KiB/s / 3.0 MiB/s", "2.00"),
        ("run-b", "sync", "succeeded", "12.3", "5.0", "7.5", "0.5000", "0.7500",
         "85.0 (50.0-120.0)", "1.0 KiB / 3.0 KiB", "-", "-"))
    assert comparison.labels == ("mode=async", "mode=sync")
    assert comparison.loss[0].points == ((100.0, 1.5), (200.0, 0.25))
    assert comparison.rate[0].points == ((5.0, 100.0), (7.5, 400.0))
    text = io.StringIO()
    render_text(comparison, text)
    printed = text.getvalue()
    for row in comparison.rows:
        assert all(cell in printed for cell in row)
    assert "loss by step" in printed and "● mode=async" in printed and "▲ mode=sync" in printed
    page = render_html(comparison)
    assert page.count("<svg") == 2 and page.count("<polyline") == 4
    assert "<td>250.0 (100.0-400.0)</td>" in page and "<script" not in page


def test_the_compare_command_writes_html_and_rejects_a_non_run_dir(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = write_run(tmp_path / "runs", "run-a", "async", (100.0, 300.0), 0.25, 0.9, None)
    page = tmp_path / "out.html"
    assert cli.main(["compare", str(one), "--html", str(page)]) == 0
    assert "<polyline" in page.read_text()
    assert f"comparison written to {page}" in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path)]) == ExitCode.USAGE
    assert capsys.readouterr().err == (f"error: {tmp_path}: no summary.json (not a run directory, "
                                       "or the run has not finished)\n")
    assert cli.main(["sweep", str(tmp_path / "none.yaml"), "--set", "mode=sync"]) == ExitCode.USAGE
    assert "error: " in capsys.readouterr().err
    assert cli.main(["sweep", str(tmp_path / "none.yaml"), "--set", "mode"]) == ExitCode.USAGE
    assert "expected NAME=VALUE[,VALUE...]" in capsys.readouterr().err
