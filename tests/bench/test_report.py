"""BENCHMARKS.md as one dated report: every section names the run that produced it, and the
Targets table is built from the sections' target lines, so the two cannot disagree."""

from __future__ import annotations

from pathlib import Path

from bench.harness.report import (
    TARGETS,
    Figure,
    Section,
    Stamp,
    Target,
    merge,
    sections_of,
    stamp_of,
    targets_table,
    with_targets,
    write_section,
)

REPO = Path(__file__).resolve().parents[2]
OLD = Stamp("2026-11-23", "2 cores", "1-minute load average 3.2")
NEW = Stamp("2026-11-27", "2 cores", "quiet")


def _section(title: str, stamp: Stamp, p99: float) -> str:
    figure = Figure("key p99", (p99,), unit=" ms", digits=1, target=Target("<", 100, " ms"),
                    held_back="a busy machine")
    return Section(title, "python -m bench.x", "What it measures.", figures=[figure],
                   stamp=stamp).markdown()


def test_the_repository_report_is_dated_and_its_targets_are_its_sections() -> None:
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    sections = [(title, body) for title, body in sections_of(text) if title != TARGETS]
    assert len(sections) >= 10
    for title, body in sections:
        stamp = stamp_of(body)
        assert stamp is not None, f"section {title!r} does not say which run produced it"
        assert stamp.machine and stamp.load, title
    assert with_targets(text) == text, "the Targets table disagrees with the sections below it"
    assert "| 5 | 2026-11-23 | keypress latency under flood, p99 | 104.6 ms |" in text


def test_the_targets_table_follows_the_sections() -> None:
    report = with_targets("# Benchmarks\n\n" + _section("1. Flood", OLD, 104.6))
    assert report.index("## Targets") < report.index("## 1. Flood")
    assert "| 1 | 2026-11-23 | key p99 | 104.6 ms | < 100 ms | **missed**: a busy machine |" in report
    # A section measured again: its row changes with it, date included.
    again = with_targets(report.replace("104.6 ms", "7.0 ms").replace("**missed**: a busy machine", "met")
                         .replace("Run: 2026-11-23", "Run: 2026-11-27"))
    assert "| 1 | 2026-11-27 | key p99 | 7.0 ms | < 100 ms | met |" in again
    assert "104.6" not in targets_table(again)


def test_a_benchmark_replaces_its_own_section_and_keeps_the_others_dates(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(with_targets("# Benchmarks\n\n" + _section("1. Flood", OLD, 104.6)
                                 + "\n" + _section("8. Warm start", OLD, 50.0)))
    write_section(path, "8. Warm start", _section("8. Warm start", NEW, 60.0))
    text = path.read_text()
    assert "| 1 | 2026-11-23 | key p99 | 104.6 ms |" in text
    assert "| 8 | 2026-11-27 | key p99 | 60.0 ms |" in text and "50.0 ms" not in text
    assert with_targets(text) == text


def test_the_campaign_merges_into_a_report_that_holds_other_sections() -> None:
    existing = with_targets("# Old heading\n\n" + _section("1. Flood", OLD, 104.6)
                            + "\n" + _section("8. Warm start", OLD, 50.0)
                            + "\n## Failed runs\n\n- a run that failed then\n")
    new = with_targets("# Benchmarks\n\nNew heading.\n\n" + _section("1. Flood", NEW, 7.0))
    merged = merge(existing, new)
    assert merged.startswith("# Benchmarks\n\nNew heading.\n\n## Targets")
    assert [title for title, _ in sections_of(merged)] == [TARGETS, "1. Flood", "8. Warm start"]
    assert "| 1 | 2026-11-27 | key p99 | 7.0 ms |" in merged
    assert "| 8 | 2026-11-23 | key p99 | 50.0 ms |" in merged
    assert "Failed runs" not in merged  # that run's failures are not this run's


def test_a_stamp_reads_back_what_it_writes() -> None:
    assert Stamp.parse(NEW.line()) == NEW
    assert Stamp.parse("Measured yesterday") is None
    assert Stamp.parse(Stamp.now().line()) is not None
