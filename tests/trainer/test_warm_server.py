"""The fork server (``python -m trainer.warm``) with real processes: each forked task has its
own thread and device settings, stays a separate process group, and 100 starts in a row
never hang. One pool (one TensorFlow import) for the whole file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.warm_pool import REPO, Pool, first_line, read_all, run_task, running_pool
from trainer.warm import client, wire

PROBE = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    from threadpoolctl import threadpool_info
    tf1 = tf.compat.v1
    with tf1.Session(graph=tf1.Graph()) as session:
        session.run(tf1.constant(1.0) + 1.0)
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    blas = [i["num_threads"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
    proc_env = dict(e.split("=", 1) for e in open("/proc/self/environ").read().split(chr(0)) if "=" in e)
    print(json.dumps({
        "inter_op": names.count("tf_Compute"),
        "blas": blas,
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "growth": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH"),
        "visible_gpus": len(tf.config.list_physical_devices("GPU")),
        "cpus": sorted(os.sched_getaffinity(0)),
        "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "ppid": os.getppid(),
        "argv": sys.argv, "cwd": os.getcwd(),
        "proc_env": {k: v for k, v in proc_env.items() if k.startswith(("TF_NUM", "TFDIST_WARM"))},
    }), flush=True)
""")


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with running_pool() as started:
        assert os.stat(os.path.dirname(started.path)).st_mode & 0o777 == 0o700
        yield started
        assert started.process.stdin is not None
        started.process.stdin.close()  # EOF: the server ends
        assert started.process.wait(timeout=10) == 0
        assert not os.path.exists(started.path)


def test_each_task_gets_its_own_threads_devices_and_cpus(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    seen = []
    for inter, gpus, growth, cpus in ((2, "0,1", "true", "0"), (1, "", "false", "1")):
        env = {"TF_NUM_INTEROP_THREADS": str(inter), "OMP_NUM_THREADS": str(inter),
               "CUDA_VISIBLE_DEVICES": gpus, "TF_FORCE_GPU_ALLOW_GROWTH": growth,
               "TFDIST_CPUS": cpus if len(os.sched_getaffinity(0)) > 1 else ""}
        pid, code, out, err = run_task(pool, [str(script), "--flag"], env, tmp_path)
        assert code == 0, err
        report = json.loads(next(line for line in out.splitlines() if '"inter_op"' in line))
        assert report["inter_op"] == inter  # TensorFlow's pools: sized at first use, per task
        # numpy's and scipy's OpenBLAS read OMP_NUM_THREADS when loaded (in the pool): re-applied.
        assert report["blas"] and set(report["blas"]) == {inter}
        assert (report["gpus"], report["growth"]) == (gpus, growth)
        assert report["visible_gpus"] == 0  # no GPU here, and none initialised by the pool
        if len(os.sched_getaffinity(0)) > 1:
            assert report["cpus"] == [int(cpus)]
        # Its own session and process group, a child of the pool, its own argv and folder.
        assert report["pid"] == report["pgid"] == report["sid"] == pid
        assert report["ppid"] == pool.process.pid
        assert report["argv"] == [str(script), "--flag"]
        assert report["cwd"] == str(tmp_path)
        # What /proc/PID/environ shows (the leftover sweep reads it): the task's own.
        assert report["proc_env"] == {"TF_NUM_INTEROP_THREADS": str(inter)}
        seen.append(report)
    assert seen[0]["inter_op"] != seen[1]["inter_op"]


def test_exit_codes_and_signals_come_back(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "exit.py"
    script.write_text("import os, sys\n"
                      "if sys.argv[1] == 'kill': os.kill(os.getpid(), 9)\n"
                      "sys.exit(int(sys.argv[1]))\n")
    assert run_task(pool, [str(script), "3"], {}, tmp_path)[1] == 3
    assert run_task(pool, [str(script), "kill"], {}, tmp_path)[1] == -signal.SIGKILL


def test_a_task_the_pool_cannot_serve_is_refused(pool: Pool, tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(pool.path)
    r, w = os.pipe()
    env = {**os.environ, "PYTHONHASHSEED": "123"}  # read when an interpreter starts
    wire.send_request(sock, wire.Request(("x.py",), env, str(tmp_path)), (r, w, w))
    os.close(r)
    os.close(w)
    answer = wire.parse_reply(sock.makefile("rb").readline())
    assert "PYTHONHASHSEED" in answer["refused"]


def test_a_hundred_warm_starts_in_a_row(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "toy.py"
    script.write_text("import sys\nprint('toy', sys.argv[1])\nprint('err', file=sys.stderr)\n")
    started = time.monotonic()
    for i in range(100):
        _, code, out, err = run_task(pool, [str(script), str(i)], {}, tmp_path, timeout=30)
        assert code == 0 and f"toy {i}" in out and "err" in err, (i, code, out, err)
    assert time.monotonic() - started < 100  # a start is a fork, not an import


def test_a_pid_line_asked_for_comes_before_the_tasks_first_output(pool: Pool, tmp_path: Path) -> None:
    """The remote client's ``tfdist-pid N warm``: the task writes it before anything of its
    own (printed by the client after the reply, it raced a task that prints at once). The
    reply is read only once the task has ended, the client at its slowest."""
    script = tmp_path / "quick.py"
    script.write_text("import sys\nsys.stdout.write('at once\\n')\nsys.stdout.flush()\n")
    for extra, expected in (({wire.PID_LINE: "tfdist-pid {pid} warm\n"}, "tfdist-pid {pid} warm\nat once\n"),
                            ({}, "at once\n")):  # the local launcher's requests: no such line
        (stdin_r, stdin_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
        request = wire.Request((str(script),), {**os.environ, "PYTHONPATH": str(REPO)}, str(tmp_path), extra)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(pool.path)
        wire.send_request(sock, request, (stdin_r, out_w, err_w))
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
        out, err = read_all(out_r, err_r, 30)
        os.close(stdin_w)
        answer = wire.parse_reply(first_line(sock))
        assert client.wait(sock) == 0, err
        assert out.startswith(expected.format(pid=answer["pid"])), (out, err)  # (then the shim's end)


def test_a_program_whose_module_the_pool_imported_starts_cold_in_place(pool: Pool, tmp_path: Path) -> None:
    """``six`` is imported by TensorFlow in the pool: a program with its own six.py gets its
    own, as a cold start would, by becoming a cold task (same pid)."""
    (tmp_path / "six.py").write_text("MINE = True\n")
    script = tmp_path / "uses_six.py"
    script.write_text("import os, six\n"
                      "print('mine' if getattr(six, 'MINE', False) else 'pool', os.getpid())\n")
    pid, code, out, err = run_task(pool, [str(script)], {}, tmp_path)
    assert code == 0, err
    assert f"mine {pid}" in out
    assert client.COLD_NOTICE in err and "six" in err


def test_a_task_collects_garbage_but_never_walks_the_pool_s_heap(pool: Pool, tmp_path: Path) -> None:
    """The pool imports with the collector off and freezes what it imported: its tasks
    collect their own garbage (the collector is on, as in a fresh interpreter) while the
    pool's objects, TensorFlow's included, are in the permanent generation, so a task's
    full collection neither walks them nor copies their pages."""
    script = tmp_path / "heap.py"
    script.write_text("import gc, json\n"
                      "print(json.dumps({'on': gc.isenabled(), 'frozen': gc.get_freeze_count(),"
                      " 'unreachable': gc.collect()}))\n")
    _, code, out, err = run_task(pool, [str(script)], {}, tmp_path)
    assert code == 0, err
    report = json.loads(next(line for line in out.splitlines() if '"frozen"' in line))
    assert report["on"] is True
    assert report["frozen"] > 100_000  # the import's objects (a bare interpreter has none frozen)


def test_the_trainer_pool_preloads_the_default_dataset_read_only(tmp_path: Path) -> None:
    """The trainer's pool loads digits once, before forking: its tasks share the arrays (read
    only, so none can change them for the others) instead of each parsing the file again."""
    code = textwrap.dedent("""
        import gc, json, sys
        from trainer.warm import __main__ as pool
        pool._preload("trainer")
        from trainer import data
        cached = data._digits.cache_info().currsize
        from trainer.settings import Dataset
        from types import SimpleNamespace
        loaded = data.load(SimpleNamespace(dataset=Dataset.DIGITS))
        arrays = (loaded.train.images, loaded.train.labels, loaded.test.images, loaded.test.labels)
        print(json.dumps({"cached": cached, "same": loaded is data._digits(),
                          "writeable": any(a.flags.writeable for a in arrays),
                          "on": gc.isenabled(), "frozen": gc.get_freeze_count()}))
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert (report["cached"], report["same"], report["writeable"], report["on"]) == (1, True, False, True)
    assert report["frozen"] > 100_000


def test_the_pool_finds_the_thread_pools_once_and_each_task_only_sets_them(tmp_path: Path) -> None:
    """A task's OMP_NUM_THREADS reaches the BLAS and OpenMP libraries the pool loaded through
    the libraries the pool found before forking: the task does not walk every loaded library
    again (20 ms of each warm start), and gets the same limits."""
    code = textwrap.dedent("""
        import json, os, threadpoolctl
        import numpy, sklearn.utils  # numpy's OpenBLAS, scikit-learn's OpenMP: as the pool has them
        from trainer.warm import child
        child.prepare_thread_limits()

        def walked(*args, **kwargs):
            raise AssertionError("the task looked for the libraries again")

        threadpoolctl.threadpool_limits = walked
        threadpoolctl.ThreadpoolController = walked
        os.environ["OMP_NUM_THREADS"] = "1"
        child._apply_thread_counts()
        print(json.dumps({i["internal_api"]: i["num_threads"] for i in child._loaded_pools.info()}))
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"openblas": 1, "openmp": 1}
