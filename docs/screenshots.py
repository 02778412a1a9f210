"""``python docs/screenshots.py``: SVG screenshots of the app's main panes from the scripted
2 ps + 2 worker run the snapshot tests use (no cluster, same pictures on every machine), for
states a real run rarely holds still for (a failed task and its hint, the help). Writes
docs/screenshots/*.svg. The README's pictures are of a real run: docs/real_screenshots.py."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.app.scripted import T0, ScriptedCore, failed_history, running_history  # noqa: E402
from trainer.settings import TrainingSettings  # noqa: E402
from tui.app.app import TfdistApp  # noqa: E402
from tui.config.load import load_config  # noqa: E402
from tui.core.events import ControllerEvent  # noqa: E402
from tui.core.options import RunOptions  # noqa: E402
from tui.core.usage import Usage, UsageSample  # noqa: E402

OUT = REPO / "docs" / "screenshots"
SIZE = (120, 36)


class Sampled:
    """Stands for the usage monitor (tui.core.usage): CPU and memory as a real run shows them."""

    latest = UsageSample(t=T0 + 40, tasks={
        "ps0": Usage(12.0, 310 << 20), "ps1": Usage(9.0, 305 << 20),
        "worker0": Usage(181.0, 640 << 20), "worker1": Usage(176.0, 652 << 20)},
        hosts={"localhost": Usage(378.0, 1907 << 20)})

#: (file name, history, keys pressed before the picture)
SHOTS = (
    ("tasks.svg", running_history, ("down", "down")),
    ("failed.svg", failed_history, ("down", "down", "down")),
    ("throughput.svg", running_history, ("tab", "tab", "tab")),
    ("placement.svg", running_history, ("tab", "tab")),
    ("help.svg", running_history, ("question_mark",)),
)


History = Callable[[TrainingSettings], list[ControllerEvent]]


async def shoot(name: str, history: History, keys: tuple[str, ...]) -> Path:
    config = load_config(REPO / "hosts.yaml")
    options = RunOptions(config=config, runs_root=REPO / "docs" / ".no-runs")
    core = ScriptedCore(history(config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    app.animation_level = "none"  # pictures of where things end, not half way there
    async with app.run_test(size=SIZE) as pilot:
        app.dashboard.usage = Sampled.latest
        await pilot.pause()
        app.refresh_dashboard(force=True)
        await pilot.press(*keys)
        await pilot.pause()
        path = OUT / name
        path.write_text(app.export_screenshot(title=f"tfdist-tui: {name[:-4]}"), encoding="utf-8")
    return path


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, history, keys in SHOTS:
        print(await shoot(name, history, keys))


if __name__ == "__main__":
    asyncio.run(main())
