"""Scaling against the machine's compute limit: a 1 ps + N worker cluster (N up to the
machine's cores) versus N independent single-process trainers of the same model without a
ps, measured in the same run, for the mlp and cnn models, once with TensorFlow's default
thread pools and once with the controller's share of the cores (tui.plan.allocation). Every
figure comes from a time-based window (``--window``, 10 s by default; :mod:`bench.harness.window`)
after every process is warm; the windows' lengths are printed and reported beside the
ratios.

Each configuration is measured with the trainer's ``fuse`` setting on and off (a row each),
and the workers' sampled step anatomy (``trainer.anatomy``: mean share of each part over
the window's sampled steps) is reported beside each cluster measurement.

    python -m bench.training.scaling [--window 10] [--models mlp,cnn] [--workers 1,2]
        [--fuse true,false] [--no-write]

Prints the table and the ratios; writes its section of BENCHMARKS.md unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import window as windows
from bench.harness.report import Machine, Section, load_average, table, write_section
from bench.training.scaling_runs import DATASETS, Measured, MeasureError, measure_cluster, measure_limit
from trainer.settings import convert
from tui.config.resources import ThreadsMode
from tui.launch.probe import probe_local

#: At its default size, on 2 cores.
RUN_TIME = "about 20 min"  # (each cluster twice: fuse on and off)

COMMAND = "python -m bench.training.scaling"
TITLE = "11. Scaling against the compute limit"
OUTPUT = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
MODES = (ThreadsMode.TENSORFLOW, ThreadsMode.AUTO)


#: What ``python -m bench.training.step_profile`` showed when this benchmark was written (2 shared
#: cores, load average about 14); kept as a note, not measured each run.
PROFILE_NOTE = (
    "Where a single worker's step goes (`python -m bench.training.step_profile --model mlp|cnn`: 1 ps "
    "+ 1 worker, step stats of TensorFlow's full trace; op times overlap, so they are not "
    "exclusive). **mlp**: 7.56 ms a step against 1.77 ms alone without a ps (0.23); op time "
    "per step: variable reads (worker receiving from the ps) 3.65 ms, gradient pushes (ps "
    "receiving) 2.99 ms, apply 0.04 ms, global-step update 0.01 ms, input pipeline 0.44 ms, "
    "the model's compute 0.30 ms; Python around `session.run` including the step events 0.02 "
    "ms. **cnn**: 145.9 ms against 135.2 ms alone (0.93); compute 186 ms of op time (two "
    "intra-op threads), apply 11 ms, input 0.4 ms, Python 0.02 ms. So the small model's gap is "
    "the gRPC round trips of every variable read and gradient push (one RecvTensor per "
    "variable each way, per step), which the ps architecture pays per step whatever the "
    "model; what was ours (event writing, the global-step update, the input pipeline) costs "
    "under 0.5 ms of a step, and the thread pools, sized by the controller, are the part we "
    "could change: capping every task at its bare share of the cores was 22-25 % slower than "
    "TensorFlow's defaults on this machine (a worker waits for the ps most of a step), hence "
    "a worker's pool of twice its share.")


@dataclass
class Row:
    """One model and worker count: the limit, and the cluster in each thread mode (None
    where a measurement failed)."""

    model: str
    workers: int
    limit: Measured | None
    cluster: dict[ThreadsMode, Measured | None]
    shares: str = ""
    fuse: bool = True

    def of_limit(self, mode: ThreadsMode) -> float | None:
        """The cluster's examples/sec in ``mode`` over the limit."""
        cluster = self.cluster.get(mode)
        return None if cluster is None or self.limit is None else \
            cluster.examples_per_sec / self.limit.examples_per_sec

    @property
    def allocation_gain(self) -> float | None:
        """Cluster examples/sec with the controller's allocation over TF's defaults."""
        auto, default = self.cluster.get(ThreadsMode.AUTO), self.cluster.get(ThreadsMode.TENSORFLOW)
        return None if auto is None or default is None else auto.examples_per_sec / default.examples_per_sec


def _number(measured: Measured | None) -> str:
    return "failed" if measured is None else f"{measured.examples_per_sec:,.0f}"


def _over(measured: Measured | None) -> str:
    return "" if measured is None else f" over {measured.seconds:.1f} s"


def _windows(row: Row) -> str:
    """The shortest and longest window of the row's measurements."""
    lengths = [m.seconds for m in (row.limit, *row.cluster.values()) if m is not None]
    if not lengths:
        return "-"
    low, high = min(lengths), max(lengths)
    return f"{low:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f} s"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fused(fuse: bool) -> str:
    return "on" if fuse else "off"


def measure(models: Sequence[str], worker_counts: Sequence[int], seconds: float,
            say: Callable[[str], None] = print, fuse_settings: Sequence[bool] = (True, False)) -> list[Row]:
    """Every measurement, models x worker counts x fuse settings x thread modes (the limit
    once per model and worker count, shared by its fuse rows)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfdist-scaling-") as scratch:
        for model in models:
            for n in worker_counts:
                try:
                    limit: Measured | None = measure_limit(model, n, ThreadsMode.AUTO, seconds)
                except MeasureError as exc:
                    limit = None
                    print(f"limit {model} x{n}: {exc}", file=sys.stderr)
                say(f"{model} N={n}: limit {_number(limit)} examples/s{_over(limit)}")
                for fuse in fuse_settings:
                    rows.append(_measure_row(model, n, fuse, limit, seconds, Path(scratch), say))
    return rows


def _measure_row(model: str, n: int, fuse: bool, limit: Measured | None, seconds: float,
                 scratch: Path, say: Callable[[str], None]) -> Row:
    """One configuration's cluster in each thread mode."""
    row = Row(model, n, limit, {}, fuse=fuse)
    for mode in MODES:
        try:
            row.cluster[mode], allocation = measure_cluster(
                model, n, mode, seconds,
                scratch / f"{model}-{n}-{mode.value}-fuse-{_fused(fuse)}", fuse=fuse)
            if mode is ThreadsMode.AUTO:
                row.shares = "; ".join(f"{name} {share.describe()}"
                                       for name, share in allocation.shares.items())
        except MeasureError as exc:
            row.cluster[mode] = None
            print(f"cluster {model} x{n} {mode.value}: {exc}", file=sys.stderr)
        say(f"{model} N={n} fuse {_fused(fuse)} {mode.value}: cluster "
            f"{_number(row.cluster[mode])} examples/s{_over(row.cluster[mode])}")
    return row


def section(rows: Sequence[Row], seconds: float) -> Section:
    """The scaling part of BENCHMARKS.md."""
    machine = Machine.here()
    host = probe_local()
    intro = (
        f"Examples/sec of all processes together over a window of {seconds:g} s or more once "
        f"every process is past {windows.WARMUP_LOCAL_STEPS} steps (async, batch 64; mlp on "
        "digits, cnn on synthetic 28x28 input). "
        "**limit**: N independent single-process trainers of the same model, no ps "
        "(`bench/training/solo.py`), each with the controller's share of the cores (N tasks on the "
        "machine), the machine's compute limit for it; **cluster**: 1 ps + N workers of "
        "the trainer on loopback. **TF**: TensorFlow's default thread pools (every task sized "
        "for the whole machine, `resources: {threads: tensorflow}`); **alloc**: the "
        "controller's share of the cores (`tui/plan/allocation.py`: intra-op threads = a ps's share "
        "of the cores, twice a worker's share capped at the machine's cores; inter-op = "
        "max(2, intra-op)). Ratios: cluster over the limit, and alloc over TF; **windows**: "
        "the shortest and longest window of the row's measurements. "
        f"Measured on {machine.describe()}; probed: {host.describe()}; load average "
        f"{load_average()} at the end.")
    result = Section(TITLE, COMMAND, intro)
    body = [[row.model, str(row.workers), _fused(row.fuse),
             _number(row.limit), *(_number(row.cluster[m]) for m in MODES),
             *(_ratio(row.of_limit(m)) for m in MODES), _ratio(row.allocation_gain), _windows(row)]
            for row in rows]
    result.tables.append(table(["model", "N", "fuse", "limit", "cluster TF", "cluster alloc",
                                "cluster/limit TF", "cluster/limit alloc", "alloc/TF", "windows"], body))
    anatomy = [f"- {row.model}, N={row.workers}, fuse {_fused(row.fuse)}, {mode.value}: {measured.anatomy()} "
               f"({len(measured.anatomies)} sampled steps)"
               for row in rows for mode in MODES
               if (measured := row.cluster.get(mode)) is not None and measured.anatomies]
    if anatomy:
        result.notes.append("Where the workers' steps went (`trainer.anatomy`: the mean share of "
                            "each part over the window's sampled steps, each a full trace):\n\n"
                            + "\n".join(anatomy))
    shares = [f"- {row.model}, N={row.workers}: {row.shares}" for row in rows if row.shares]
    if shares:
        result.notes.append("The shares the controller gave (alloc):\n\n" + "\n".join(shares))
    result.notes.append(PROFILE_NOTE)
    return result


def default_workers() -> tuple[int, ...]:
    """1, 2, 4, ... up to this machine's cores (and the cores themselves)."""
    cores = probe_local().cores
    counts = [2**k for k in range(int(math.log2(cores)) + 1)]
    return tuple(sorted({*counts, cores}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", "--seconds", dest="window", type=float, default=windows.DEFAULT_SECONDS,
                        metavar="SECONDS", help="window per measurement (default %(default)g)")
    parser.add_argument("--models", default="mlp,cnn", help=f"comma-separated, of {', '.join(DATASETS)}")
    parser.add_argument("--workers", default=None, help="comma-separated worker counts "
                                                          "(default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--fuse", default="true,false",
                        help="comma-separated fuse settings, a row each (default %(default)s)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the report to update")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    workers = tuple(int(w) for w in args.workers.split(",")) if args.workers else default_workers()
    if args.window <= 0 or not models or min(workers) < 1:
        parser.error("--window must be > 0, --models non-empty, --workers >= 1")
    fuse_settings = [convert("fuse", word) for word in args.fuse.split(",") if word]
    rows = measure(models, workers, args.window, fuse_settings=fuse_settings)
    text = section(rows, args.window).markdown()
    print(text)
    if not args.no_write:
        write_section(args.output, TITLE, text)
    failed = any(m is None for row in rows for m in (row.limit, *row.cluster.values()))
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
