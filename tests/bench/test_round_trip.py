"""The round-trip benchmark (bench/training/round_trip.py) at a tiny size: a real ps and
worker per variant on loopback and one solo trainer, every run timed, every process gone
afterwards. The timings are the benchmark's to report; what must hold at any size is
asserted: positive times, an exchange that costs CPU, a bound between 0 and 1 whenever the
exchange costs more than a local run."""

from __future__ import annotations

import uuid

import pytest

from bench.training import round_trip
from tests.bench.test_smoke import tagged_processes

pytestmark = pytest.mark.integration


def test_round_trip_times_every_run_of_every_variant_and_leaves_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tags: list[str] = []
    real_uuid = round_trip.uuid.uuid4

    def recorded_uuid() -> uuid.UUID:  # the run's tag, to look for leftovers by it
        made = real_uuid()
        tags.append(f"round-trip-{made.hex[:8]}")
        return made

    monkeypatch.setattr(round_trip.uuid, "uuid4", recorded_uuid)
    variants = [round_trip.VARIANTS["default"], round_trip.VARIANTS["no-spin"]]
    results = round_trip.measure(variants, "mlp", window=0.3, reps=1, say=None)
    assert results.floats == 64 * 256 + 256 + 256 * 10 + 10  # the mlp's parameters on digits
    assert len(results.solo) == 1 and results.solo[0] > 0
    for variant in variants:
        times = results.runs[variant.name]
        assert all(len(times[run]) == 1 and times[run][0] > 0 for run in round_trip.RUNS)
        assert results.cpu[variant.name][0] > 0
        for bound, extra in zip(results.bounds(variant.name), results.extra(variant.name), strict=True):
            assert extra <= 0 or 0 < bound < 1
    markdown = round_trip.section(results, variants, reps=1).markdown()
    assert "| default |" in markdown and "| no-spin |" in markdown
    assert tagged_processes(tags) == []


def test_an_unknown_variant_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        round_trip.main(["--variants", "default,warp-drive", "--no-write"])
    assert exited.value.code == 2
    assert "unknown warp-drive" in capsys.readouterr().err
