"""The benchmarks at a tiny size, so they keep working. It asserts what must hold at
any size (no line lost from the run directory, keys handled, every cluster run succeeded
and left no process behind, every ratio positive and finite, every table written); the
timings are the benchmark's to report, not a test's to judge."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import psutil
import pytest

from bench.__main__ import Report, generate
from bench.harness.processes import TAG_ENV
from bench.harness.report import Section

pytestmark = pytest.mark.integration


def test_pipe_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.controller.pipe import main

    assert main(["--lines", "20000", "--tasks", "1,2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| --no-ui", "| app"))]
    assert len(rows) == 4
    assert all(row.endswith("| 0 |") for row in rows), rows  # no line missing from the run dir


def tagged_processes(tags: list[str]) -> list[str]:
    """Live processes started by these benchmark runs (they carry one of their tags)."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.pid != os.getpid() and process.info["status"] != psutil.STATUS_ZOMBIE \
                    and process.environ().get(TAG_ENV) in tags:
                found.append(" ".join(process.cmdline()))
        except psutil.Error:
            continue
    return found


# -- python -m bench: every benchmark at a tiny size -------------------------------------------

#: One worker, so the seed-style program's non-chief 30 s wait cannot stretch the smoke run;
#: sync mode, so the seed-style program's SyncReplicasOptimizer hook is exercised too.
TINY = ["--reps", "1", "--window", "0.5", "--workers", "1", "--models", "mlp", "--modes", "sync",
        "--seed-modes", "sync", "--flood-tasks", "2", "--flood-rate", "200", "--flood-seconds", "2",
        "--placement-models", "cnn", "--placement-ps", "2"]


@pytest.fixture(scope="module")
def tiny_report() -> Report:
    return generate(TINY)


def section_of(report: Report, title: str) -> Section:
    (section,) = [s for s in report.sections if s.title == title]
    return section


def test_flood_benchmark_smoke(tiny_report: Report) -> None:
    """bench.controller.flood.measure as the report ran it (2 tasks x 200 lines/s x 2 s, :data:`TINY`)."""
    section = section_of(tiny_report, "5. Log flood into the Textual app")
    figures = {f.label: f.samples for f in section.figures}
    (table,) = section.tables
    assert figures["lines missing from the run directory"] == (0.0,)
    assert "| lines missing from the run directory | 0 of 800 |" in table  # every expected line
    (p99,) = figures["keypress latency under flood, p99"]
    presses = re.search(r"\((\d+) presses\)", table)
    assert presses and int(presses.group(1)) > 0 and p99 > 0, table


def test_placement_benchmark_smoke(tiny_report: Report) -> None:
    """bench.training.placement.table as the report ran it (cnn at 2 ps, :data:`TINY`)."""
    (text,) = section_of(tiny_report, "4. Placement balance").tables
    assert "| cnn, round_robin, partitions 1 | 2.00 |" in text
    assert "| cnn, greedy, partitions = ps | 1.00 |" in text


def test_every_cluster_run_succeeded_and_left_nothing_behind(tiny_report: Report) -> None:
    assert tiny_report.failures == []
    assert len(tiny_report.tags) == 1 + 4 and all(tiny_report.tags)  # a calibration run, then 4 sides
    assert not tagged_processes(tiny_report.tags)


def test_every_section_and_target_row_is_written(tiny_report: Report) -> None:
    text = tiny_report.text
    for title in ("1. Time to first step", "2. Throughput under supervision",
                  "3. Our trainer versus the seed-style program", "4. Placement balance",
                  "5. Log flood into the Textual app", "6. Sync end", "Targets"):
        assert f"## {title}" in text
    assert "python -m bench --reps 1" in text and "\nRun: " in text and " · machine: " in text
    assert "Textual " in text and "TensorFlow " in text
    for row in ("| mlp sync | ", "| worker0's first step (chief) | ", "| cnn, greedy, partitions 1 |",
                "lines missing from the run directory | 0 of 800"):
        assert row in text, row


def test_every_figure_is_positive_and_finite(tiny_report: Report) -> None:
    labels = [f.label for f in tiny_report.figures]
    for expected in ("mlp sync: controller --no-ui / bare, every worker stepping",
                     "mlp sync: controller --no-ui / bare trainer, examples/sec",
                     "mlp sync: Textual app / bare trainer, examples/sec",
                     "mlp sync: trainer / seed-style, examples/sec",
                     "mlp sync: bare trainer, last step to every process exited",
                     "mlp sync: controller --no-ui, last step to every process exited"):
        assert expected in labels, labels
    for figure in tiny_report.figures:
        if figure.label.startswith("lines missing"):
            assert figure.median == 0
            continue
        assert figure.median is not None and math.isfinite(figure.median) and figure.median > 0, figure
        assert figure.verdict() in ("met",) or figure.verdict().startswith("**missed**")


def test_bench_command_writes_the_report(tmp_path: Path, tiny_report: Report,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """main() writes what generate() produced, to --output."""
    import bench.__main__ as command

    monkeypatch.setattr(command, "generate", lambda argv: tiny_report)
    output = tmp_path / "BENCHMARKS.md"
    assert command.main([*TINY, "--output", str(output)]) == 0
    assert output.read_text() == tiny_report.text


def test_scaling_benchmark_smoke(tmp_path: Path) -> None:
    """bench.training.scaling's two measurements at a tiny size, side by side (timings not judged)."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.harness.report import replace_section
    from bench.training.scaling import TITLE, Row, section
    from bench.training.scaling_runs import measure_cluster, measure_limit
    from tui.config.resources import ThreadsMode

    with ThreadPoolExecutor(2) as pool:
        cluster = pool.submit(measure_cluster, "mlp", 1, ThreadsMode.AUTO, 0.5, tmp_path)
        limit = pool.submit(measure_limit, "mlp", 1, ThreadsMode.AUTO, 0.5)
        (measured, allocation), alone = cluster.result(), limit.result()
    assert measured.examples_per_sec > 0 and measured.seconds >= 0.5 and alone.examples_per_sec > 0
    assert set(allocation.shares) == {"ps0", "worker0"}
    row = Row("mlp", 1, alone, {ThreadsMode.AUTO: measured, ThreadsMode.TENSORFLOW: None})
    text = section([row], 0.5).markdown()
    assert f"## {TITLE}" in text and "| mlp | 1 |" in text and "failed" in text
    report = replace_section("# B\n\n## 6. Sync end\n\nold\n", TITLE, text)
    assert replace_section(report, TITLE, text) == report and report.startswith("# B\n\n## 6.")
