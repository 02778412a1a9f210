"""A capped link on the lab (tests/support/netlab.py): the ps's host capped to 2 Mbit/s in the
middle of a run draws a hint on ps0 naming what its link carries and what the placement needs
at the run's earlier step rate; lifting the cap takes the hint back. The judgement as logic:
tests/core/test_slow_link.py."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.launch.netfaults import Controller, controllers, start, stepping
from tests.launch.test_lab_runs import assert_hosts_empty
from tests.support import wait_until
from tests.support.netlab_fixture import MakeLab
from tui.core.slow_link import REFERENCE_WINDOWS, SLOW_FACTOR, WINDOW

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
__all__ = ["controllers"]  # the fixture, used by name

#: The cap: the ps's variables and gradients (~19 KiB each per step) at ~10 steps/s, where the
#: calm run made 150-380 steps/s on this machine.
CAP = "2mbit"
#: Far more than the run can make in the test: it is stopped by hand once the hint is back down.
STEPS = 10**6


def _records(controller: Controller, kind: str, task: str) -> list[dict[str, Any]]:
    return [e for e in controller.events() if e["type"] == kind and e.get("task") == task]


def _calm_samples(controller: Controller) -> int:
    """Traffic samples taken while training advanced, in the run directory's traffic.jsonl."""
    paths = list(controller.runs.glob("*/traffic.jsonl"))
    if not paths:
        return 0
    count = 0
    for line in paths[0].read_text().splitlines():
        try:
            count += json.loads(line)["global_step"] > 0
        except ValueError:
            continue  # a line being written
    return count


def test_a_capped_ps_link_draws_a_hint_with_both_figures_that_goes_when_the_cap_does(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    controller = start(controllers, lab, tmp_path, {"lease": 30, "unreachable_timeout": 120}, STEPS, 380)
    for worker in ("worker0", "worker1"):
        stepping(controller, worker)
    # The watch needs calm windows of its own before it has a rate to judge by: two samples a
    # second (tui.core.traffic.SAMPLE_INTERVAL) for that long, and one window more.
    wait_until(lambda: _calm_samples(controller) >= 2 * WINDOW * (REFERENCE_WINDOWS + 1)
               or controller.process.poll() is not None, 180, lambda: controller.text()[-3000:])
    assert not _records(controller, "task_hint", "ps0"), controller.text()[-3000:]
    lab.cap("h0", CAP)
    try:
        wait_until(lambda: _records(controller, "task_hint", "ps0") or controller.process.poll() is not None,
                   120, lambda: controller.text()[-3000:])
    finally:
        lab.uncap("h0")
    (hint,) = (e["hint"] for e in _records(controller, "task_hint", "ps0"))
    figures = re.fullmatch(r"ps0's link carried ([\d.]+) (KiB|MiB)/s over the last \d+ s; the placement at "
                           r"this run's earlier (\d+) steps/s needs ~([\d.]+) (KiB|MiB)/s: a slow or capped "
                           r"link\? .*", hint)
    assert figures is not None, hint
    scale = {"KiB": 1024, "MiB": 2**20}
    carried, needed = float(figures[1]) * scale[figures[2]], float(figures[4]) * scale[figures[5]]
    print(f"\n{hint}")
    assert carried < needed / SLOW_FACTOR, hint
    # The figure is the cap's own (411.7 KiB/s measured): 2 Mbit/s each way, tbf's burst aside.
    assert carried <= 1.2 * 2 * 2e6 / 8, hint
    text = controller.text()
    assert f"ps0     | hint: {hint}" in text  # the headless screen
    assert f"ps0     | warning: {hint}" in text
    wait_until(lambda: _records(controller, "task_hint_cleared", "ps0")
               or controller.process.poll() is not None, 120, lambda: controller.text()[-3000:])
    (cleared,) = _records(controller, "task_hint_cleared", "ps0")
    print(cleared["reason"])
    assert cleared["reason"].startswith("its link carried "), cleared
    assert "ps0     | info: ps0's link is no longer slow: its link carried" in controller.text()
    assert controller.process.poll() is None, controller.text()[-3000:]
    controller.process.send_signal(signal.SIGINT)  # the run stops as a user's Ctrl-C stops it
    controller.finish()
    assert_hosts_empty(lab)
