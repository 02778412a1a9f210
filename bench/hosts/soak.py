"""A soak of random faults on a lab of real hosts: per fault, what it was detected as, the time
until every worker stepped again, and the collateral (other tasks' incidents), beside a
fault-free baseline's wall time on the same lab.

The standard layout on 3 network-namespace hosts (ps0, worker0, worker1, each alone on its
host), the built-in trainer over SSH, warm, ``restart: {policy: on-failure}``; a seeded
schedule of faults of every kind (SIGKILL of a worker or of the ps, SIGSTOP of a worker for
15-25 s, a worker's host cut off for 8-15 s), each injected once every worker steps again
after the one before (tests/launch/soak.py, which the suite's short soak uses too). The ps's
link is paced while faults come, so that the run cannot end first.

    python -m bench.hosts.soak --seed N [--faults 8] [--mode sync] [--no-baseline]
                               [--kind cut-host ...] [--seconds S] [--steps N]
    python -m bench.hosts.soak --faults 0 [--steps N | --minutes M] [--mode sync]

``--faults 0`` runs the fault-free run alone, ``--steps`` long or stopped (SIGINT, as Ctrl-C)
after ``--minutes``, and prints its incidents (a run without faults should have none: each
breaks a promise) and the steps its workers tried again (a retry that passed costs no restart).

Needs root, iproute2 and openssh-server (as the lab does). Exits 1 when a promise is broken
(exit 0, checkpoints monotonic, every incident explained, every worker back within 60 s, no
slow-link hint: no fault slows a link).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness.report import run_footer
from tests.launch.netfaults import PACE, Controller, start, summary_of
from tests.launch.soak import (
    NETWORK,
    RECOVERY_BOUND,
    STEPS_PER_FAULT,
    Fault,
    FaultKind,
    checkpoint_faults,
    checkpoints,
    context,
    recoveries,
    schedule,
    slow_link_hints,
    soak,
    table,
    unexplained,
)
from tests.support.netlab import NetLab, missing_requirements
from tui.common.exit_codes import ExitCode

RUN_TIME = "about 6 min"
COMMAND = "python -m bench.hosts.soak"
#: The controller's own limit (``--timeout``): generous, a soak of many faults takes minutes.
TIMEOUT = 1800.0
#: The target of a fault-free run that is stopped after ``--minutes``: never reached.
UNREACHABLE_STEPS = 10**9
#: Seconds of a soak's run each fault takes beyond its own length (detection, restart, every
#: worker stepping again, the next fault's turn), for sizing the run from the fault-free
#: run's step rate (:func:`sized_steps`); measured 10-30 s a fault on the lab.
SECONDS_PER_FAULT = 30.0
#: How much longer than the faults' expected time the soak's run is made, so that a slower
#: stretch does not end it first.
SIZE_MARGIN = 1.5


def _stop(controller: Controller) -> None:
    if controller.process.poll() is None:
        controller.process.kill()
        controller.process.wait()


@dataclass(frozen=True)
class Baseline:
    """The fault-free run: its exit code, wall time (None: no summary), incidents (kind, task,
    reason) and the trainer's lines that say a step was tried again."""

    code: int
    wall: float | None
    incidents: list[tuple[str, str, str]]
    retries: list[str]
    #: Stopped on purpose (--minutes): exit 130 is then what it should end with.
    stopped: bool = False
    global_step: int = 0


def baseline(lab: NetLab, temp: Path, steps: int, mode: str, minutes: float | None = None) -> Baseline:
    """The same run without faults (the ps's link not paced), stopped after ``minutes`` if
    given, as Ctrl-C stops it."""
    controllers: list[Controller] = []
    (temp / "baseline").mkdir()
    limit = TIMEOUT + (0.0 if minutes is None else minutes * 60)
    controller = start(controllers, lab, temp / "baseline", NETWORK, steps, limit, mode)
    try:
        if minutes is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                controller.process.wait(minutes * 60)
            if controller.process.poll() is None:
                controller.process.send_signal(signal.SIGINT)
        code = controller.finish(limit + 60)
    finally:
        _stop(controller)
    if not list(controller.runs.glob("*/summary.json")):
        return Baseline(code, None, [], [])
    summary = summary_of(controller)
    return Baseline(code, float(summary["wall_time"]),
                    [(i["kind"], i["task"], i["reason"]) for i in summary["incidents"]],
                    [line for line in controller.text().splitlines() if "; trying again" in line],
                    stopped=minutes is not None, global_step=int(summary["global_step"]))


def fault_free(base: Baseline, steps: int, mode: str) -> list[str]:
    """The fault-free run's report; the last line says whether it kept its promises."""
    expected = ExitCode.INTERRUPTED if base.stopped else ExitCode.OK
    broken = ([f"exit {base.code}"] if base.code != expected else []) + \
        [f"incident: {task} {kind}: {reason}" for kind, task, reason in base.incidents]
    length = f"stopped at step {base.global_step} as asked" if base.stopped else f"{steps} steps"
    lines = [f"fault-free run, {length}, {mode}: exit {base.code}, wall time "
             + (f"{base.wall:.0f} s" if base.wall is not None else "unknown (no summary)"),
             f"incidents: {len(base.incidents)}",
             *(f"  {kind} {task}: {reason}" for kind, task, reason in base.incidents),
             f"steps tried again: {len(base.retries)}", *(f"  {line}" for line in base.retries)]
    return [*lines, "promises: " + ("all kept" if not broken else "; ".join(broken))]


def sized_steps(steps: int, base: Baseline | None, faults: list[Fault]) -> int:
    """The soak's target: ``steps``, or more where the fault-free run's step rate says the run
    would end before its faults did (a quiet machine made 16,000 steps in 114 s, ending the
    run after its second fault of eight)."""
    if base is None or not base.wall or not base.global_step or base.code != 0:
        return steps
    seconds = sum(fault.seconds + SECONDS_PER_FAULT for fault in faults) * SIZE_MARGIN
    return max(steps, round(base.global_step / base.wall * seconds))


def soaked(lab: NetLab, temp: Path, faults: list[Fault], mode: str,
           steps: int) -> tuple[list[str], list[str], float]:
    """One soak of ``steps``: its table, the promises it broke, and its wall time."""
    controllers: list[Controller] = []
    lab.cap("h0", PACE)
    (temp / "soak").mkdir()
    controller = start(controllers, lab, temp / "soak", NETWORK, steps, TIMEOUT, mode)
    ended_early = ""
    try:
        try:
            done = soak(lab, controller, faults)
        except AssertionError:  # the run ended before its faults did: its summary says why
            done, ended_early = [], "the run ended before the faults did"
        finally:
            lab.uncap("h0")  # the faults are over: the run ends at full speed
        code = controller.finish()
    finally:
        _stop(controller)
    if not list(controller.runs.glob("*/summary.json")):  # the controller ended before its run did
        return [], [f"{ended_early or 'no summary'}; the controller said: {controller.text()[-1500:]}"], 0.0
    summary = summary_of(controller)
    incidents = summary["incidents"]
    recoveries(controller, done)
    broken = [ended_early] if ended_early else []
    broken += [f"exit {code}: {summary['reason']}"] if code != 0 else []
    broken += checkpoint_faults(checkpoints(controller))
    broken += [f"unexplained incident: {i['task']} {i['reason']} ({context(controller, i, done)})"
               for i in unexplained(incidents, done)]
    broken += [f"a slow-link hint, though no fault slows a link: {hint}"
               for hint in slow_link_hints(controller)]
    broken += [f"{injected.fault}: {worker} not stepping within {RECOVERY_BOUND:g} s"
               for injected in done for worker, seconds in injected.recovered.items()
               if seconds is None or seconds > RECOVERY_BOUND]
    return table(controller, done, incidents), broken, float(summary["wall_time"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="the fault schedule's seed")
    parser.add_argument("--faults", type=int, default=8, help="how many faults (every kind before any twice)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the fault-free run")
    parser.add_argument("--mode", choices=("async", "sync"), default="async", help="the training mode")
    parser.add_argument("--kind", choices=[kind.name.lower().replace("_", "-") for kind in FaultKind],
                        action="append",
                        help="only faults of this kind (again for more kinds; default: every kind)")
    parser.add_argument("--seconds", type=float,
                        help="how long each SIGSTOP and cut lasts (default: 15-25 s, 8-15 s)")
    parser.add_argument("--minutes", type=float,
                        help="with --faults 0: stop the run (as Ctrl-C does) after this long")
    parser.add_argument("--steps", type=int,
                        help=f"the runs' target step (default: {STEPS_PER_FAULT} per fault, "
                             f"{STEPS_PER_FAULT * 8} with --faults 0; the soak's run more where "
                             "the fault-free run's step rate says it would end before its faults)")
    args = parser.parse_args(argv)
    if args.faults < 0:
        parser.error("--faults must be 0 (the fault-free run alone) or more")
    if args.faults == 0 and args.no_baseline:
        parser.error("--faults 0 runs the fault-free run alone: --no-baseline leaves nothing")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.minutes is not None and (args.faults or args.steps or args.minutes <= 0):
        parser.error("--minutes (above 0) is for the fault-free run alone (--faults 0), in place of --steps")
    if args.seconds is not None and args.seconds <= 0:
        parser.error("--seconds must be above 0")
    kinds = ([FaultKind[name.upper().replace("-", "_")] for name in args.kind] if args.kind
             else list(FaultKind))
    faults = schedule(args.seed, args.faults, kinds, args.seconds)
    only = f" ({', '.join(kind.value for kind in kinds)} only)" if args.kind else ""
    why = missing_requirements()
    if why:
        print(f"{COMMAND}: {why}", file=sys.stderr)
        return 2
    began, load = time.time(), os.getloadavg()[0]
    steps = UNREACHABLE_STEPS if args.minutes else args.steps or STEPS_PER_FAULT * (args.faults or 8)
    with tempfile.TemporaryDirectory(prefix="soak-") as temp, NetLab(3, Path(temp)) as lab:
        base = None if args.no_baseline else baseline(lab, Path(temp), steps, args.mode, args.minutes)
        if base is not None and not faults:
            report = fault_free(base, steps, args.mode)
            print("\n".join(report))
            print(run_footer(1, began, load))
            return 0 if report[-1] == "promises: all kept" else 1
        soak_steps = steps if args.steps else sized_steps(steps, base, faults)
        lines, broken, wall = soaked(lab, Path(temp), faults, args.mode, soak_steps)
    sized = "" if soak_steps == steps else " (sized from the fault-free run's step rate)"
    print(f"soak, seed {args.seed}, {args.faults} faults{only}, {soak_steps} steps{sized}, {args.mode}")
    print("\n".join(lines))
    print(f"wall time {wall:.0f} s with faults" + ("" if base is None else
          f", {base.wall:.0f} s without" if base.wall is not None and base.code == 0
          else ", the fault-free run failed"))
    print("promises: " + ("all kept" if not broken else "; ".join(broken)))
    print(run_footer(1, began, load))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
