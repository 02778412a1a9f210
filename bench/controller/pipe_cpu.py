"""The controller's CPU per line of task output, in-process: ``run_headless`` on a flood of
``LINES`` lines from ``TASKS`` tasks (``bench/controller/pipe_task.py``), counting this process's CPU
only (the tasks are its children; imports are done before the clock starts). ``REPO`` is
the checkout whose ``tui`` is measured (another one, such as the branch's base, for a
before/after; this repository's ``bench`` makes the cluster either way).

    python -m bench.controller.pipe_cpu REPO LINES TASKS
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

#: At its default size, on 2 cores.
RUN_TIME = "about 1 min"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    repo, lines, tasks = args[0], int(args[1]), int(args[2])
    from bench.controller import pipe  # this repository's (it imports nothing of tui)

    sys.path.insert(0, str(Path(repo).resolve()))
    # Imported after the path is set: the tui measured is REPO's.
    from tui.config.load import load_config
    from tui.core.options import RunOptions
    from tui.headless import run_headless

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = load_config(pipe.hosts(folder, tasks, lines // tasks))
        with open("/dev/null", "w") as out:
            began, cpu_began = time.perf_counter(), time.process_time()
            code = asyncio.run(run_headless(RunOptions(config=config, runs_root=folder / "runs"),
                                            out=out, err=out, handle_signals=False))
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        rates = pipe.task_rates(folder)
    print(f"cpu={cpu:.2f}s wall={wall:.1f}s us/line={cpu / lines * 1e6:.1f} "
          f"task lines/s={sum(rates):,.0f} exit={code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
