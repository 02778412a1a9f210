"""``tfdist-tui sweep`` with the real trainer, and the traffic it measures per ps.

One 2 x 2 sweep (placement x partitions) of a model whose variables are very unequal, on 2
ps tasks and one worker, serves every assertion: the sweep runs to the end with 4 rows of
the right settings, round-robin placement's measured traffic per ps is in the proportion
its placement predicts, and greedy placement with 2 partitions is balanced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.clirun import write_hosts
from tests.support.scenarios import run_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: 64x2048 + 2048x10 weights against 2048 + 10 biases: round-robin puts the two weight
#: matrices on ps1 and the biases (and the step counter) on ps0, about 74 : 1.
TRAINING = {"mode": "async", "steps": 400, "log_every": 20, "hidden_units": 2048}


@pytest.mark.asyncio
async def test_a_sweep_compares_placements_by_measured_traffic(tmp_path: Path) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", ps=["localhost:auto"] * 2, workers=["localhost:auto"],
                        training=TRAINING, run_dir=tmp_path / "runs")
    result = await run_to_end(["sweep", str(hosts), "--set", "placement=round_robin,greedy",
                               "--set", "partitions=1,2"], tmp_path, fake=False)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    (folder,) = (tmp_path / "runs").glob("sweep-*")
    points = json.loads((folder / "sweep.json").read_text())["points"]
    assert [(p["values"], p["state"]) for p in points] == [
        ({"placement": placement, "partitions": partitions}, "succeeded")
        for placement in ("round_robin", "greedy") for partitions in ("1", "2")]
    table = (folder / "comparison.txt").read_text()
    rows = [line for line in table.splitlines() if "succeeded" in line]
    assert len(rows) == 4
    for row, point in zip(rows, points, strict=True):
        cells = [cell.strip() for cell in row.split("│")]
        assert cells[1:5] == [Path(point["run_dir"]).name, point["values"]["partitions"],
                              point["values"]["placement"], "succeeded"]
    assert "<svg" in (folder / "comparison.html").read_text()

    def traffic(number: int) -> dict:  # type: ignore[type-arg]
        summary = json.loads((Path(points[number]["run_dir"]) / "traffic.json").read_text())["summary"]
        assert summary is not None, f"no traffic measured for {points[number]['label']}"
        return summary  # type: ignore[no-any-return]

    unequal = traffic(0)
    small, large = (ps["measured_per_sec"] for ps in unequal["ps"])
    placed_small, placed_large = (ps["placed_bytes"] for ps in unequal["ps"])
    assert placed_large / placed_small > 50
    measured, predicted = large / small, placed_large / placed_small
    assert abs(measured / predicted - 1) <= 0.2, (measured, predicted)
    for ps in unequal["ps"]:  # bytes on the ps x 2 x steps/s, give or take gRPC's overhead
        assert 0.5 < ps["measured_per_sec"] / ps["expected_per_sec"] < 1.5, ps
    balanced = traffic(3)
    assert balanced["measured_imbalance"] <= 1.1, balanced
    assert "  traffic      ps0 " in (folder / points[3]["folder"] / "output.log").read_text()
