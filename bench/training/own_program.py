"""A user's own program, by hand vs under the shim: the two example programs
(``examples/flags_supervisor``, ``examples/tf_config_monitored``), sync and async, 1 ps +
2 workers on loopback.

- **by hand**: each task started as a person would, ``python train.py ...`` in its own
  process; the ps is killed as soon as both workers have exited (a person at once, which
  flatters this side); a sync chief is left to end by itself, as it does by hand;
- **shim**: each task ``python -m trainer.shim train.py ...``; the ps is sent ``end`` when
  both workers have exited, and, as the controller does, a worker stuck after
  its last step (the sync chief's end-of-run hang) is ended with SIGTERM and counted as
  succeeded: once the target step is reached, a worker whose last ``step`` event is
  ``--stall`` seconds old is ended.

Reported per run: wall time (first process start to last exit), the non-chief's first step
(seconds from its process start to its first progress line: ``session ready`` for the flags
program, TensorFlow's first ``loss = ..., step = ...`` for the other; the same marker on both
sides) and how long after the chief's first step that came (the readiness poll shows
here; from process start, TensorFlow's import time on a loaded machine can hide it), and
the seconds from the last worker's last progress line (``training finished``;
TensorFlow's ``loss = ..., step = N``, logged every step here) to the last exit.

    python -m bench.training.own_program [--steps 300] [--stall 5] [--modes async,sync]
        [--examples flags_supervisor,tf_config_monitored]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainer import protocol
from tui.launch.local.ports import reserve_free_ports

#: At its default size, on 2 cores.
RUN_TIME = "about 5 min"

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: A worker's last progress line: the flags program prints one after its loop; the other's
#: LoggingTensorHook (run with ``--log_every=1``) logs every step, so its last one counts.
LAST_STEP = {"flags_supervisor": re.compile(r"training finished"),
             "tf_config_monitored": re.compile(r"loss = [-0-9.e]+, step = \d+")}
FIRST_STEP = {"flags_supervisor": re.compile(r"Worker \d: session ready"),
              "tf_config_monitored": re.compile(r"loss = [-0-9.e]+, step = \d+")}
CAP_SECONDS = 240.0


@dataclass
class Task:
    """One process and its timestamped output lines (stdout and stderr together)."""

    name: str
    proc: subprocess.Popen[bytes]
    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)
    exited: float | None = None
    ended_by_rule: bool = False

    def first(self, pattern: re.Pattern[str]) -> float | None:
        return next((t for t, text in self.lines if pattern.search(text)), None)

    def last(self, pattern: re.Pattern[str]) -> float | None:
        return next((t for t, text in reversed(self.lines) if pattern.search(text)), None)

    def steps(self) -> list[protocol.Step]:
        """The shim's ``step`` events (what the controller reads)."""
        parsed = (protocol.parse_event(text) for _, text in list(self.lines))
        return [e for e in parsed if isinstance(e, protocol.Step)]


@dataclass(frozen=True)
class Result:
    example: str
    mode: str
    side: str
    wall: float
    first_step: float | None
    after_chief: float | None
    end_delay: float | None
    note: str


def _args(example: str, job: str, index: int, spec: dict[str, list[str]], steps: int,
          sync: bool) -> list[str]:
    if example == "flags_supervisor":
        return [f"--ps_hosts={','.join(spec['ps'])}", f"--worker_hosts={','.join(spec['worker'])}",
                f"--job_name={job}", f"--task_index={index}", f"--train_steps={steps}",
                f"--sync_replicas={str(sync).lower()}"]
    return [f"--steps={steps}", f"--sync={str(sync).lower()}", "--log_every=1"]


def _start(example: str, job: str, index: int, spec: dict[str, list[str]], steps: int,
           sync: bool, shim: bool) -> Task:
    script = EXAMPLES / example / "train.py"
    env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": job, "index": index}}),
           "PYTHONUNBUFFERED": "1"}
    prefix = [sys.executable]
    if shim:
        prefix += ["-m", "trainer.shim"]
        env.update(TFDIST_SHIM="1", TFDIST_RUN_ID="bench",
                   PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    proc = subprocess.Popen([*prefix, str(script), *_args(example, job, index, spec, steps, sync)],
                            cwd=script.parent, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    task = Task(f"{job}{index}", proc, time.time())

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            task.lines.append((time.time(), raw.decode("utf-8", "replace").rstrip()))
    threading.Thread(target=read, daemon=True).start()
    return task


def run(example: str, mode: str, shim: bool, steps: int, stall: float) -> Result:
    """One 1 ps + 2 worker run; see the module docstring for what each side does."""
    reservations = reserve_free_ports(3)
    ports = [r.port for r in reservations]
    spec = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
    for reservation in reservations:
        reservation.release()  # at the last moment, as the controller does
    sync = mode == "sync"
    tasks = [_start(example, job, i, spec, steps, sync, shim)
             for job, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    ps, workers = tasks[0], tasks[1:]
    start = min(t.started for t in tasks)
    deadline = time.monotonic() + CAP_SECONDS
    ps_ended = False
    ticks = 0
    try:
        while any(t.exited is None for t in tasks) and time.monotonic() < deadline:
            time.sleep(0.05)
            for task in tasks:
                if task.exited is None and task.proc.poll() is not None:
                    task.exited = time.time()
            if not ps_ended and all(w.exited is not None for w in workers):
                ps_ended = True
                if shim:
                    assert ps.proc.stdin is not None
                    ps.proc.stdin.write(b"end\n")
                    ps.proc.stdin.flush()
                else:
                    os.killpg(ps.proc.pid, signal.SIGKILL)
            ticks += 1
            if shim and ticks % 10 == 0:
                _end_stalled(workers, steps, stall)
    finally:
        for task in tasks:
            if task.proc.poll() is None:
                os.killpg(task.proc.pid, signal.SIGKILL)
                task.proc.wait()
                task.exited = task.exited or time.time()
    last_exit = max(t.exited or time.time() for t in tasks)
    finished_at = [w.last(LAST_STEP[example]) for w in workers]
    last_step = max((t for t in finished_at if t is not None), default=None)
    marker = workers[1].first(FIRST_STEP[example])
    chief_marker = workers[0].first(FIRST_STEP[example])
    notes = [f"{w.name} ended {stall:g} s after its last step" for w in workers if w.ended_by_rule]
    if time.monotonic() >= deadline:
        notes.append(f"cut at {CAP_SECONDS:g} s")
    codes = {t.name: t.proc.returncode for t in tasks}
    if shim and codes["ps0"] != 0:
        notes.append(f"ps exit {codes['ps0']}")
    return Result(example, mode, "shim" if shim else "by hand", last_exit - start,
                  None if marker is None else marker - workers[1].started,
                  None if marker is None or chief_marker is None else marker - chief_marker,
                  None if last_step is None else last_exit - last_step, "; ".join(notes))


def _end_stalled(workers: list[Task], steps: int, stall: float) -> None:
    """The controller's rule: once the target step is reached, a worker whose
    last ``step`` event is ``stall`` seconds old and that is still running is ended."""
    progress = {w.name: w.steps() for w in workers}
    if not any(e.global_step >= steps for events in progress.values() for e in events):
        return
    for worker in workers:
        events = progress[worker.name]
        if (worker.exited is None and not worker.ended_by_rule and events
                and time.time() - events[-1].t > stall):
            worker.ended_by_rule = True
            os.killpg(worker.proc.pid, signal.SIGTERM)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.training.own_program", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--stall", type=float, default=5.0)
    parser.add_argument("--modes", default="async,sync")
    parser.add_argument("--examples", default="flags_supervisor,tf_config_monitored")
    ns = parser.parse_args(argv)
    header = (f"{'program':<20} {'mode':<5} {'side':<8} {'wall s':>7} {'ratio':>6} "
              f"{'non-chief 1st step s':>21} {'after chief s':>14} {'last step->exit s':>18}  note")
    print(header, flush=True)
    for example in ns.examples.split(","):
        for mode in ns.modes.split(","):
            hand = run(example, mode, False, ns.steps, ns.stall)
            shim = run(example, mode, True, ns.steps, ns.stall)
            for result in (hand, shim):
                ratio = "" if result is hand else f"{shim.wall / hand.wall:.2f}"
                print(f"{example:<20} {mode:<5} {result.side:<8} {result.wall:>7.1f} {ratio:>6} "
                      f"{_fmt(result.first_step):>21} {_fmt(result.after_chief):>14} "
                      f"{_fmt(result.end_delay):>18}  {result.note}",
                      flush=True)


if __name__ == "__main__":
    main()
