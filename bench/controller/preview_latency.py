"""How long the app's placement preview takes to show after ``+``, as an operator sees it.

    python -m bench.controller.preview_latency [HOSTS.yaml] [--presses N] [--busy K]

The real app (Textual's test driver, nothing started: the preview does not need a running
cluster) on the default hosts.yaml; each ``+`` asks for a partition count not previewed yet
(the app caches previews by settings), and the time runs from the key press until the
placements pane holds the new preview (or says why there is none). ``--busy K`` runs K
``python -c 'while 1: pass'`` beside it, killed (by pid) at the end."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tui.app.app import TfdistApp
from tui.config.load import load_config
from tui.core.options import RunOptions

#: At its default size, on 2 cores.
RUN_TIME = "about 1 min"

REPO = Path(__file__).resolve().parents[2]
SIZE = (120, 40)
LIMIT_SECONDS = 300.0


async def measure(options: RunOptions, presses: int, baseline: bool = False) -> list[float]:
    """Seconds from each ``+`` to its preview on screen; with ``baseline``, from each ``m``
    (sync/async: pending, no preview) to the status bar saying so, which is what any key
    costs the app on this machine."""
    app = TfdistApp(options, autostart=False)
    latencies: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for _ in range(presses):
            before, mode = app.pending.partitions, app.pending.mode
            started = time.perf_counter()
            await pilot.press("m" if baseline else "plus")
            while not (app.pending.mode != mode if baseline else app.pending.partitions == before + 1
                       and (app.preview is not None or app.preview_note.startswith("no preview"))):
                if time.perf_counter() - started > LIMIT_SECONDS:
                    raise SystemExit(f"no preview after {LIMIT_SECONDS:.0f} s")
                await pilot.pause(0.005)
            latencies.append(time.perf_counter() - started)
            if app.preview is None and not baseline:
                raise SystemExit(app.preview_note)
    return latencies


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, measure, print one line per press and a summary."""
    parser = argparse.ArgumentParser(prog="python -m bench.controller.preview_latency", description=__doc__)
    parser.add_argument("hosts", type=Path, nargs="?", default=REPO / "hosts.yaml")
    parser.add_argument("--presses", type=int, default=5)
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside it")
    parser.add_argument("--baseline", action="store_true",
                        help="time m (no preview) instead: what any key costs the app here")
    args = parser.parse_args(argv)
    options = RunOptions(config=load_config(args.hosts), runs_root=REPO / "runs" / "preview-bench")
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    try:
        latencies = asyncio.run(measure(options, args.presses, args.baseline))
    finally:
        for process in busy:
            process.kill()
            process.wait()
    key = "m (baseline)" if args.baseline else "+"
    for i, seconds in enumerate(latencies, start=1):
        print(f"{key} #{i}: {seconds * 1000:8.1f} ms")
    print(f"{key}, busy loops {args.busy}: median {statistics.median(latencies) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms over {len(latencies)} presses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
