"""The lab benchmarks' tables from known figures (the runs themselves need a lab and minutes:
``python -m bench.hosts.lab_start``, ``python -m bench.hosts.placement_links``)."""

from __future__ import annotations

from bench.hosts import lab_start, placement_links
from bench.hosts.placement_links import Point


def test_the_first_start_table_gives_medians_and_the_warm_over_cold_ratio() -> None:
    starts = [lab_start.Start("warm", 10.0, 20.0, 22.0), lab_start.Start("cold", 12.0, 40.0, 41.0),
              lab_start.Start("warm", 11.0, 30.0, 32.0), lab_start.Start("cold", 13.0, None, None)]
    text = lab_start.report(starts, 4)
    assert "| warm | 10.5 s (10.0–11.0) | 25.0 s (20.0–30.0) | 27.0 s (22.0–32.0) |" in text
    assert "| cold | 12.5 s (12.0–13.0) | 40.0 s (40.0–40.0) | 41.0 s (41.0–41.0) |" in text
    assert text.endswith("warm / cold, every task up: 0.62")


def test_the_placement_table_sets_each_speed_beside_the_busiest_ps_prediction() -> None:
    mib = 2**20
    points = [Point("round_robin", 1, 100.0, (2 * mib, 0), 2.0),
              Point("greedy", 1, 120.0, (mib, mib // 2), 1.3),
              Point("round_robin", 2, 190.0, (mib, mib), 1.0),
              Point("greedy", 2, 200.0, (mib, mib), None)]
    lines = placement_links.report(points, "100mbit").splitlines()
    assert "| greedy x 1 | 1.00 MiB / 0.50 MiB | 120 | 1.20x | 2.00x | 1.30 |" in lines
    assert "| greedy x 2 | 1.00 MiB / 1.00 MiB | 200 | 2.00x | 2.00x | - |" in lines
