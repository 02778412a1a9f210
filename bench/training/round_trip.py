"""The bare cost of one ps exchange per ``session.run`` and the bound it sets on the mlp's
ratio to the compute limit, with gRPC's settings side by side.

A ps and a worker (:mod:`bench.training.exchange_task`) on loopback, each with the thread
pools the controller gives it (1 ps + 1 worker on this machine, ``tui.plan.allocation``),
share one variable the size of the model's parameters (the mlp's by default). The worker
times four runs over windows of ``--window`` seconds: a local op in a plain local session
(**direct**), the same op in the distributed session (**local**), the ps's variable read onto
the worker (**read**) and that read plus a push of a tensor of the same size added to the
variable on the ps (**exchange**: what a fused async step moves). The model's own step alone
(``bench.training.solo``, one process with the whole machine) is timed in the same run.

A cluster step cannot be shorter than the solo step plus what an exchange adds to a run
(**exchange - direct**): the read must arrive before the compute and the push follows it. So
``solo / (solo + exchange - direct)`` bounds the 1-worker cluster's ratio to the compute limit
from above (the ratio of :mod:`bench.training.scaling`, whose floor for the mlp is 0.35).

Each variant (``--variants``: its environment or its way of calling the session, both in the
ps and the worker) keeps its pair of processes for the whole run; the variants and the solo
run take turns each repetition (:func:`bench.harness.stats.alternating`), so that a busy
moment of the shared machine falls on every side alike. Figures are the median (minimum–
maximum) over the repetitions.

    python -m bench.training.round_trip [--window 3] [--reps 5] [--model mlp]
        [--variants default,epoll1,no-spin,callable] [--no-write]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from bench.harness import stats
from bench.harness.processes import Child, environment, kill_tagged
from bench.harness.report import Machine, Section, load_average, table, write_section
from bench.training.scaling_runs import DATASETS, MeasureError, measure_limit, settings_for
from trainer.layout import model_weights
from tui.config.load import load_config
from tui.config.resources import ThreadsMode
from tui.launch.local.ports import reserve_free_ports
from tui.plan.allocation import allocate, host_offers

#: At its default size, on 2 cores.
RUN_TIME = "about 5 min"

COMMAND = "python -m bench.training.round_trip"
TITLE = "13. The round-trip floor"
OUTPUT = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
START_TIMEOUT = 180.0
RUNS = ("direct", "local", "read", "exchange")


@dataclass(frozen=True)
class Variant:
    """One way of running both processes: extra environment, and whether the worker calls
    the session through ``Session.make_callable``."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    use_callable: bool = False
    handler_pool: bool = False
    no_spin: bool = False
    says: str = ""
    #: Extra environment of the ps and of the worker alone.
    ps_env: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)


VARIANTS = {v.name: v for v in (
    Variant("default", says="gRPC's and TensorFlow's defaults, as the trainer runs today"),
    Variant("epoll1", {"GRPC_POLL_STRATEGY": "epoll1"}, says="`GRPC_POLL_STRATEGY=epoll1`"),
    Variant("poll", {"GRPC_POLL_STRATEGY": "poll"}, says="`GRPC_POLL_STRATEGY=poll`"),
    Variant("callable", use_callable=True, says="`Session.make_callable` instead of `Session.run`"),
    Variant("cache1", {"TF_GRPC_WORKER_CACHE_THREADS": "1"},
            says="`TF_GRPC_WORKER_CACHE_THREADS=1`: one thread polls the RPC client's queues"),
    Variant("no-ee", {"GRPC_EXPERIMENTS": "-event_engine_client,-event_engine_listener,"
                                          "-event_engine_for_all_other_endpoints"},
            says="gRPC's EventEngine experiments off (`GRPC_EXPERIMENTS`)"),
    Variant("handler-pool", handler_pool=True,
            says="`RunOptions.experimental.use_run_handler_pool`"),
    Variant("no-spin", no_spin=True,
            says="`ConfigProto.experimental.disable_thread_spinning`: TensorFlow's pool threads "
                 "sleep as soon as they run out of work instead of spinning a while"),
    Variant("pinned", ps_env={"TFDIST_CPUS": "0"}, worker_env={"TFDIST_CPUS": "1"},
            says="the ps pinned to CPU 0 and the worker to CPU 1"),
)}


class Pair:
    """A variant's ps and worker, started and warm; :meth:`time` makes one run for a window."""

    def __init__(self, variant: Variant, floats: int, thread_env: dict[str, dict[str, str]], tag: str):
        self.variant = variant
        self.results: list[str] = []
        self.changed = threading.Condition()
        reservations = reserve_free_ports(2)
        ports = ",".join(str(r.port) for r in reservations)
        for reservation in reservations:
            reservation.release()
        argv = [sys.executable, "-m", "bench.training.exchange_task", "--ports", ports,
                "--floats", str(floats)]
        if variant.no_spin:
            argv.append("--no-spin")
        self.ps = Child("ps", [*argv, "--job", "ps"],
                        environment(tag, {**thread_env["ps0"], **variant.env, **variant.ps_env}),
                        on_line=self._line)
        flags = ["--callable"] * variant.use_callable + ["--handler-pool"] * variant.handler_pool
        self.worker = Child("worker", [*argv, "--job", "worker", *flags],
                            environment(tag, {**thread_env["worker0"], **variant.env, **variant.worker_env}),
                            on_line=self._line)

    def _line(self, line: str) -> None:
        with self.changed:
            self.results.append(line.strip())
            self.changed.notify_all()

    def _await(self, check: int, timeout: float) -> str:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.results) >= check or self.worker.exited.is_set()
                                         or self.ps.exited.is_set(), timeout):
                raise MeasureError(f"{self.variant.name}: no answer in {timeout:g} s")
            if len(self.results) < check:
                # The last lines that are not TensorFlow's start-up notices.
                lines = [line for line in self.worker.stderr_tail + self.ps.stderr_tail
                         if not line.startswith(("I0000", "E0000", "W0000"))]
                tail = " / ".join(lines[-4:])[-600:]
                raise MeasureError(f"{self.variant.name}: a process exited early: {tail}")
            return self.results[check - 1]

    def wait_warm(self) -> None:
        """Until both processes said ``warm``."""
        self._await(2, START_TIMEOUT)

    def time(self, run: str, seconds: float) -> tuple[float, float]:
        """Seconds per ``run`` over a window of ``seconds``, and the CPU seconds per run of
        both processes together."""
        assert self.worker.proc.stdin is not None
        seen = len(self.results)
        ps_before = _cpu_seconds(self.ps.pid)
        self.worker.proc.stdin.write(f"{run} {seconds}\n".encode())
        self.worker.proc.stdin.flush()
        _, _, count, took, worker_cpu = self._await(seen + 1, seconds * 10 + 60).split()
        ps_cpu = _cpu_seconds(self.ps.pid) - ps_before
        return float(took) / int(count), (float(worker_cpu) + ps_cpu) / int(count)

    def close(self) -> None:
        self.worker.kill()
        self.ps.kill()


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def thread_envs(directory: Path) -> dict[str, dict[str, str]]:
    """The environment of each task's share of the cores, as the controller gives 1 ps + 1
    worker on this machine."""
    path = directory / "hosts.yaml"
    path.write_text(yaml.safe_dump({"cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"]},
                                    "resources": {"threads": ThreadsMode.AUTO.value}}), encoding="utf-8")
    config = load_config(path)
    allocation = allocate(config, host_offers(config, {}))
    return {name: share.env() for name, share in allocation.shares.items()}


def parameter_floats(model: str) -> int:
    """How many float32 values the model's parameters hold (the ps's packed read)."""
    total = 0
    for weight in model_weights(settings_for(model)):
        count = 1
        for dim in weight.shape:
            count *= dim
        total += count
    return total


@dataclass
class Results:
    """Seconds per run of each variant, and the solo step, one sample a repetition."""

    model: str
    floats: int
    window: float
    runs: dict[str, dict[str, list[float]]]
    cpu: dict[str, list[float]]  # of each variant's exchanges, ps and worker together
    solo: list[float] = field(default_factory=list)

    def extra(self, variant: str) -> list[float]:
        """What an exchange adds to a run: exchange - direct, per repetition."""
        times = self.runs[variant]
        return [e - d for e, d in zip(times["exchange"], times["direct"], strict=True)]

    def bounds(self, variant: str) -> list[float]:
        """solo / (solo + exchange - direct), each repetition's solo step with its own exchange
        (NaN where the machine slowed the direct run past the exchange)."""
        return [s / (s + x) if x > 0 else math.nan
                for s, x in zip(self.solo, self.extra(variant), strict=False)]


def measure(variants: Sequence[Variant], model: str, window: float, reps: int,
            say: object = print) -> Results:
    """Every variant's runs and the solo step, ``reps`` times in turn."""
    floats = parameter_floats(model)
    tag = f"round-trip-{uuid.uuid4().hex[:8]}"
    results = Results(model, floats, window, {v.name: {r: [] for r in RUNS} for v in variants},
                      {v.name: [] for v in variants})
    pairs: dict[str, Pair] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="tfdist-round-trip-") as scratch:
            envs = thread_envs(Path(scratch))
        for variant in variants:
            pairs[variant.name] = Pair(variant, floats, envs, tag)
        for pair in pairs.values():
            pair.wait_warm()
        sides: list[str] = ["solo", *pairs]
        for rep, side in stats.alternating(reps, sides):
            if side == "solo":
                measured = measure_limit(model, 1, ThreadsMode.AUTO, window)
                batch = settings_for(model).batch_size
                results.solo.append(batch / measured.examples_per_sec)
                _say(say, f"rep {rep + 1}: solo {model} step {results.solo[-1] * 1000:.3f} ms")
                continue
            order = RUNS if rep % 2 == 0 else tuple(reversed(RUNS))
            for run in order:
                took, cpu = pairs[side].time(run, window)
                results.runs[side][run].append(took)
                if run == "exchange":
                    results.cpu[side].append(cpu)
            _say(say, f"rep {rep + 1}: {side}: " + ", ".join(
                f"{run} {results.runs[side][run][-1] * 1000:.3f} ms" for run in RUNS)
                 + f", exchange CPU {results.cpu[side][-1] * 1000:.3f} ms")
    finally:
        for pair in pairs.values():
            pair.close()
        kill_tagged(tag)
    return results


def _say(say: object, text: str) -> None:
    if callable(say):
        say(text)


def _ms(samples: Sequence[float]) -> str:
    return stats.spread([s * 1000 for s in samples], digits=2, unit=" ms")


def _best_bound(results: Results, variant: str) -> str:
    """The bound from the fastest solo step, exchange and direct run (each its own fastest,
    the direct run's over every variant: a plain local session's run does not depend on
    gRPC's settings, and one slowed by the machine must not make the exchange look free)."""
    solo, exchange = stats.valid(results.solo), stats.valid(results.runs[variant]["exchange"])
    direct = stats.valid(d for times in results.runs.values() for d in times["direct"])
    if not solo or not exchange or not direct:
        return "n/a"
    low, cost = min(solo), max(0.0, min(exchange) - min(direct))
    return f"{low / (low + cost):.2f} ({low * 1000:.2f} / ({low * 1000:.2f} + {cost * 1000:.2f}) ms)"


def section(results: Results, variants: Sequence[Variant], reps: int) -> Section:
    """The round-trip part of BENCHMARKS.md."""
    solo = stats.median_of(results.solo)
    intro = (
        f"Seconds per `session.run` of a ps + worker pair on loopback sharing one variable of "
        f"{results.floats:,} floats (the {results.model}'s parameters), each process with the "
        f"controller's share of the cores (1 ps + 1 worker), windows of {results.window:g} s, "
        f"{reps} repetitions taking turns; median (min–max). **direct**: a local op in a plain "
        "local session; **local**: the same op in the distributed session; **read**: the ps's "
        "variable onto the worker; **exchange**: read and push back (a fused async step's "
        "transfers); **exchange CPU**: the CPU time of both processes per exchange (what is "
        "left of the exchange's wall time is waiting); **bound**: solo / (solo + exchange - "
        "direct), the most the 1-worker "
        f"cluster's ratio to the compute limit can be with one exchange a step. The {results.model} "
        f"alone (`bench.training.solo`, the whole machine): {_ms(results.solo)} a step"
        + (f" ({settings_for(results.model).batch_size / solo:,.0f} examples/s)." if solo else ".")
        + f" Measured on {Machine.here().describe()}; load average {load_average()} at the end.")
    result = Section(TITLE, COMMAND, intro)
    body = [[v.name, *(_ms(results.runs[v.name][r]) for r in RUNS), _ms(results.cpu[v.name]),
             _ms(results.extra(v.name)), stats.spread(results.bounds(v.name), digits=2, unit="")]
            for v in variants]
    result.tables.append(table(["variant", *RUNS, "exchange CPU", "exchange - direct", "bound"], body))
    best = [f"{v.name} {_best_bound(results, v.name)}" for v in variants]
    result.notes.append(
        "From each side's fastest repetition (the least disturbed by the rest of a shared "
        "machine): solo / (solo + exchange - direct) = " + ", ".join(best) + ".")
    result.notes.append("Variants:\n\n" + "\n".join(f"- **{v.name}**: {v.says}" for v in variants))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=float, default=3.0, metavar="SECONDS",
                        help="window per run (default %(default)g)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default %(default)d)")
    parser.add_argument("--model", default="mlp", choices=sorted(DATASETS))
    parser.add_argument("--variants", default="default,epoll1,no-spin,callable",
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default %(default)s)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the report to update")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        parser.error(f"--variants: unknown {', '.join(unknown) or '(none given)'}; "
                     f"known: {', '.join(VARIANTS)}")
    if args.window <= 0 or args.reps < 1:
        parser.error("--window must be > 0 and --reps >= 1")
    variants = [VARIANTS[n] for n in names]
    try:
        results = measure(variants, args.model, args.window, args.reps)
    except MeasureError as exc:
        print(f"round trip: {exc}", file=sys.stderr)
        return 1
    text = section(results, variants, args.reps).markdown()
    print(text)
    if not args.no_write:
        write_section(args.output, TITLE, text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
