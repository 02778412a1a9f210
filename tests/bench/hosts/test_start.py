"""``python -m bench.hosts``'s table from known figures (the runs need a lab and minutes)."""

from __future__ import annotations

from bench.hosts.start import Cut, Result, cut_table, table


def test_the_table_gives_each_time_and_the_controllers_cost_per_host() -> None:
    lines = table([Result(8, "idle", first=0.4, ready=9.5, started=11.0, running=12.25, start_cpu=3.2,
                          cpu=0.02, rss_mb=80.0, load=3.25),
                   Result(32, "stepping", first=0.5)]).splitlines()
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|") == 14
    assert lines[2] == ("| 8 | 32 | idle | 0.40 s | 9.5 s | 11.0 s | 12.2 s | 3.2 s | 2.0% | 0.25% | 80 MB | "
                        "10.00 MB | 3.2 |")
    assert lines[3] == ("| 32 | 128 | stepping | 0.50 s | not seen | not seen | not seen | not seen | "
                        "not seen | not seen | not seen | not seen | not seen |")


def test_the_cut_table_says_what_came_back() -> None:
    lines = cut_table(Cut(8, 64, 20.0, out_seen=8, back=6.25, running=256, tasks=256, carried_on=True,
                          load=12.0)).splitlines()
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|") == 9
    assert lines[2] == "| 8 | 64 | 20 s | 8 | 6.2 s | 256/256 | yes | 12.0 |"
    assert "| not seen | 0/0 | no |" in cut_table(Cut(8, 64, 20.0)).splitlines()[2]
