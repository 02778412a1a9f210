"""``python docs/real_screenshots.py``: pictures of a real run for the README and the guide.

Starts the real app (its core in a process of its own, as ``tfdist-tui hosts.yaml`` does)
against a real local cluster, the repository's default hosts.yaml, waits until the workers
are stepping, and saves SVG screenshots of the main panes into docs/pictures/; then the same
for one example program (examples/tf2_coordinator, the TF2 coordinator under the shim).
With ``rsvg-convert`` on the PATH (Debian: librsvg2-bin) the README's picture gets a PNG.
Run directories go to a temporary folder. The scripted pictures (docs/screenshots.py) stay
for states a real run rarely holds still for, and the snapshot tests keep their own."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tui.app.app import TfdistApp  # noqa: E402
from tui.config.load import apply_overrides, load_config  # noqa: E402
from tui.core.options import RunOptions  # noqa: E402
from tui.core.task_state import TaskState  # noqa: E402

OUT = REPO / "docs" / "pictures"
SIZE = (120, 36)
#: How long a run may take to reach the state pictured (TensorFlow imports on a loaded machine).
LIMIT_SECONDS = 600.0
STEPS = "50000"


@dataclass(frozen=True)
class Shot:
    """A picture: its file name and the keys pressed (from the Logs pane) before it."""

    name: str
    keys: tuple[str, ...]


def stepping(app: TfdistApp, steps: int) -> bool:
    """Every task running and the global step at least ``steps``, with the placement known."""
    rows = app.dashboard.rows.values()
    step = max((r.global_step or 0 for r in rows), default=0)
    return bool(rows) and all(r.state is TaskState.RUNNING for r in rows) and step >= steps \
        and app.dashboard.placement is not None


async def shoot(hosts: Path, shots: tuple[Shot, ...], ready: Callable[[TfdistApp], bool],
                runs: Path, chief_row: int) -> list[Path]:
    """Run the app on ``hosts`` until ``ready``, then take each shot. The run is given
    :data:`STEPS` steps (``--steps``), so that it still trains while the pictures are
    taken (the default hosts.yaml's 2000 take seconds); the app stops it at the end."""
    options = RunOptions(config=apply_overrides(load_config(hosts), steps=STEPS), runs_root=runs)
    app = TfdistApp(options)
    app.animation_level = "none"  # pictures of where things end, not half way there
    written = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + LIMIT_SECONDS
            while not ready(app):
                if time.monotonic() > deadline or app.dashboard.finished is not None:
                    raise SystemExit(f"{hosts}: the run never reached the state to picture")
                await pilot.pause(0.25)
            await pilot.press(*["down"] * chief_row)  # the chief: its log is the busy one
            for shot in shots:
                await pilot.press(*shot.keys)
                await pilot.pause(0.5)
                app.refresh_dashboard(force=True)
                await pilot.pause()
                path = OUT / shot.name
                title = f"tfdist-tui {hosts.relative_to(REPO)} --steps {STEPS}"
                path.write_text(app.export_screenshot(title=title), encoding="utf-8")
                written.append(path)
            await pilot.press("q")
            await pilot.pause()
            if app.is_running:
                await pilot.press("y")
    finally:
        if app.core is not None:
            app.core.close(timeout=30.0)
    return written


def to_png(svg: Path) -> Path | None:
    """A PNG beside ``svg`` (for pages that cannot show SVG), or None without a converter."""
    converter = shutil.which("rsvg-convert")
    if converter is None:
        return None
    png = svg.with_suffix(".png")
    subprocess.run([converter, "--zoom", "1.25", "--output", str(png), str(svg)], check=True)
    return png


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tfdist-pictures-") as runs:
        written = await shoot(REPO / "hosts.yaml", (
            Shot("tasks.svg", ()),
            Shot("all-logs.svg", ("tab",)),
            Shot("placement.svg", ("tab",)),
            Shot("throughput.svg", ("tab",)),
        ), lambda app: stepping(app, 300), Path(runs), chief_row=1)
        written += await shoot(REPO / "examples" / "tf2_coordinator" / "hosts.yaml", (
            Shot("own-program.svg", ()),
            Shot("own-program-placement.svg", ("tab", "tab")),
        ), lambda app: stepping(app, 50), Path(runs), chief_row=4)  # ps0, ps1, worker0, worker1
    for svg in written:
        print(svg.relative_to(REPO))
    # The README's picture as PNG too (some viewers of a README show no SVG).
    png = to_png(OUT / "tasks.svg")
    print(png.relative_to(REPO) if png else "no PNG: rsvg-convert not found (Debian: librsvg2-bin)")


if __name__ == "__main__":
    asyncio.run(main())
