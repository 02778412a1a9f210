"""Run directories with known results, for the comparison tests (unit and UI)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from trainer import protocol


def write_run(root: Path, name: str, mode: str, rates: tuple[float, float], loss: float,
              accuracy: float, traffic: tuple[float, float] | None,
              config_path: Path = Path("hosts.yaml")) -> Path:
    """A run directory with known results: two step events (one per worker) and a done."""
    path = root / name
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(f"# resolved from {config_path}\n" + yaml.safe_dump({
        "cluster": {"ps": ["localhost:1", "localhost:2"], "worker": ["localhost:3", "localhost:4"]},
        "training": {"model": "mlp", "mode": mode, "steps": 200, "checkpoint_dir": f"/x/{name}"}}))
    started = 1000.0
    (path / "summary.json").write_text(json.dumps({
        "run_id": name, "outcome": "succeeded", "started_at": started, "wall_time": 12.34,
        "global_step": 200, "target": 200, "final_loss": loss, "final_accuracy": accuracy}))
    events = [
        protocol.Placement(role="worker", index=0, model="mlp", strategy="greedy", partitions=1,
                           num_ps=2, variables=(), ps_bytes=(1024, 3072), t=started + 4),
        protocol.Step(role="worker", index=0, global_step=100, local_step=50, loss=1.5,
                      examples_per_sec=rates[0], step_time=0.1, target=200, t=started + 5),
        protocol.Step(role="worker", index=1, global_step=200, local_step=100, loss=loss,
                      examples_per_sec=rates[1], step_time=0.1, target=200, t=started + 7.5),
        protocol.Done(role="worker", index=0, reason="target_reached", global_step=200, loss=loss,
                      accuracy=accuracy, t=started + 8),
    ]
    lines = [json.dumps({"type": "trainer_event", "task": e.task, "event": json.loads(e.to_json()),
                         "t": e.t}) for e in events]
    (path / "events.jsonl").write_text("\n".join(lines) + "\n")
    if traffic is not None:
        ps = [{"task": f"ps{i}", "bytes_sent": 1, "bytes_received": 1, "measured_per_sec": rate,
               "expected_per_sec": None, "placed_bytes": None} for i, rate in enumerate(traffic)]
        (path / "traffic.json").write_text(json.dumps({"summary": {
            "window_seconds": 2.0, "steps_per_sec": 40.0, "ps": ps,
            "measured_imbalance": 2 * max(traffic) / sum(traffic), "expected_imbalance": 1.5}}))
    return path
