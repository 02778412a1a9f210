"""``python -m trainer``: run one ps or worker task; ``python -m trainer plan``: print the
placement a run would use, without starting any server."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Sequence

from trainer import lifecycle, portclaim, protocol
from trainer import settings as settings_mod
from trainer.cluster import Cluster, Role, UsageError, resolve
from trainer.lifecycle import EXIT_FAILED, EXIT_OK, emit, exit_now, fail_usage


def _parser(plan: bool) -> argparse.ArgumentParser:
    prog = "python -m trainer" + (" plan" if plan else "")
    parser = argparse.ArgumentParser(
        prog=prog,
        description=("Print the placement of every variable shard for a cluster, without "
                     "starting a server." if plan else
                     "Run one ps or worker task of a between-graph-replicated TF1 training run. "
                     "The cluster and role come from TF_CONFIG or the --ps_hosts/--worker_hosts/"
                     "--job_name/--task_index flags."))
    cluster = parser.add_argument_group("cluster")
    for flag in ("ps_hosts", "worker_hosts", "job_name", "task_index"):
        cluster.add_argument(f"--{flag}", f"--{flag.replace('_', '-')}", dest=flag, default=None)
    if plan:
        cluster.add_argument("--num-ps", type=int, default=None,
                             help="plan for N ps tasks (no addresses needed)")
        cluster.add_argument("--num-workers", type=int, default=None)
        parser.add_argument("--table", action="store_true", help="a human table, not the event")
    else:
        parser.add_argument("--watch-stdin", choices=("auto", "yes", "no"), default="auto",
                            help="exit when stdin reaches EOF (auto: when stdin is a pipe)")
        parser.add_argument("--hold", action="store_true",
                            help="import, load and build, print a 'loaded' event, then wait for "
                                 "a 'go' line on stdin before starting the server")
    parser.add_argument("--verbose", action="store_true",
                        help="keep TensorFlow's start-up logging and warnings")
    settings_mod.add_arguments(parser.add_argument_group("training"))
    return parser


class _ArgumentError(Exception):
    pass


def _parse(argv: Sequence[str], plan: bool) -> argparse.Namespace:
    parser = _parser(plan)

    def error(message: str) -> None:
        raise _ArgumentError(message)

    parser.error = error  # type: ignore[method-assign,assignment]
    return parser.parse_args(list(argv))


def _settings_and_cluster(ns: argparse.Namespace, need_role: bool
                          ) -> tuple[settings_mod.TrainingSettings, Cluster, Role | None]:
    settings = settings_mod.from_namespace(ns)
    num_ps = getattr(ns, "num_ps", None)
    if num_ps is not None:
        workers = getattr(ns, "num_workers", None) or 1
        if num_ps < 1 or workers < 1:
            raise UsageError("--num-ps and --num-workers must be positive")
        cluster: Cluster = Cluster(tuple(f"localhost:{2222 + i}" for i in range(num_ps)),
                                   tuple(f"localhost:{3222 + i}" for i in range(workers)))
        role = None
    else:
        cluster, role = resolve(os.environ.get("TF_CONFIG"), ns.ps_hosts, ns.worker_hosts,
                                ns.job_name, ns.task_index, need_role=need_role)
    problems = settings.problems(len(cluster.worker))
    if problems:
        name, message = problems[0]
        raise UsageError(f"{settings_mod.flag_name(name)} {message}")
    return settings, cluster, role


def plan(argv: Sequence[str]) -> None:
    try:
        ns = _parse(argv, plan=True)
        settings, cluster, _ = _settings_and_cluster(ns, need_role=False)
    except (_ArgumentError, UsageError, ValueError) as exc:
        fail_usage(str(exc))
        return
    from trainer import data, placement
    from trainer.graph import build
    from trainer.tfimport import import_tf

    if not ns.verbose:
        lifecycle.filter_stderr()
    tf = import_tf(ns.verbose)
    report = build(tf, settings, cluster, 0, data.input_shape(settings)).placement
    if ns.table:
        lifecycle.log(placement.table(report))
    else:
        emit(report)
    exit_now(EXIT_OK)


def run(argv: Sequence[str]) -> None:
    # Die at once on Ctrl-C/SIGTERM: a Python-level handler would only run after the
    # blocking session call returns, which in a stalled sync step is never.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        ns = _parse(argv, plan=False)
        settings, cluster, role = _settings_and_cluster(ns, need_role=True)
    except (_ArgumentError, UsageError, ValueError) as exc:
        fail_usage(str(exc))
        return
    assert role is not None
    if ns.hold and ns.watch_stdin == "no":
        fail_usage("--hold reads 'go' from stdin; it cannot be combined with --watch-stdin no")
    lifecycle.watch_parent("yes" if ns.hold else ns.watch_stdin)
    if not (ns.hold and os.environ.get(protocol.PORT_HELD_ENV)):
        try:
            portclaim.claim((cluster.ps if role.job == "ps" else cluster.worker)[role.index])
        except portclaim.PortInUse as exc:
            _fail(role, "port_in_use", str(exc), show_traceback=False)
    from trainer import data, threads
    from trainer.loop import run_ps, run_worker
    from trainer.tfimport import import_tf

    threads.pin(threads.from_env())  # before TensorFlow starts any thread
    if not ns.verbose:
        lifecycle.filter_stderr()
    tf = import_tf(ns.verbose)
    try:
        if role.job == "ps":
            run_ps(tf, cluster, role, hold=ns.hold)
        else:
            run_worker(tf, settings, cluster, role, hold=ns.hold)
    except data.DatasetMissing as exc:
        fail_usage(str(exc), role.job, role.index)
    except tf.errors.OpError as exc:
        _fail(role, type(exc).__name__, lifecycle.root_cause(exc.message or str(exc)), show_traceback=False)
    except Exception as exc:  # a bug: keep the traceback for the log
        _fail(role, type(exc).__name__, str(exc), show_traceback=True)
    exit_now(EXIT_OK)


def _fail(role: Role, kind: str, message: str, show_traceback: bool) -> None:
    emit(protocol.Error(role=role.job, index=role.index, type=kind, message=message))
    if show_traceback:
        traceback.print_exc()
    print(f"trainer: {role.job}{role.index}: {kind}: {message}", file=sys.stderr)
    exit_now(EXIT_FAILED)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["plan"]:
        plan(args[1:])
    else:
        run(args)


if __name__ == "__main__":
    main()
