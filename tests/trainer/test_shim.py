"""``python -m trainer.shim``: the example programs run unchanged as real 1 ps + 2 worker
clusters on loopback, and the shim reports them through the event protocol."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.warm_pool import Pool
from tests.trainer.cluster_runner import REPO, LocalCluster, Task, free_ports, shim_pool
from trainer import protocol
from trainer.lifecycle import EXIT_ORPHANED

pytestmark = pytest.mark.integration
__all__ = ["shim_pool"]  # the fixture, used by name: the example clusters fork from it

EXAMPLES = REPO / "examples"
#: A non-chief that waits out SessionManager's 30 s poll would take this long or more from its
#: ready to its first step (it checks once, then sleeps the poll); one that steps sooner did not
#: wait for it, however slow the chief's initialisation was (18.3 s at a load average of ~120
#: from other work, where half the poll was the bound).
SESSION_MANAGER_POLL = 30.0
START = 120.0  # start-up of three TensorFlow processes on a loaded 2-core machine


def outputs(cluster: LocalCluster) -> str:
    return "\n".join(f"--- {t.name} (exit {t.proc.returncode})\n{t.output[-3000:]}"
                     for t in cluster.tasks)


def first_step_delay(task: Task) -> float:
    """Seconds from the task's ``ready`` to its first ``step`` event."""
    (ready,) = task.of(protocol.Ready)
    return task.of(protocol.Step)[0].t - ready.t


def assert_placement(task: Task, partitions: int) -> protocol.Placement:
    (placement,) = task.of(protocol.Placement)
    assert placement.role == "worker" and placement.num_ps == 1
    hidden = [v for v in placement.variables if v.variable.endswith("hidden1/kernel")
              or v.variable.endswith("hidden/weights")]
    assert len(hidden) == partitions and {v.num_shards for v in hidden} == {partitions}
    assert sum(placement.ps_bytes) == sum(v.bytes for v in placement.variables) > 0
    return placement


def test_tf_config_example_async_under_the_shim(shim_pool: Pool) -> None:
    """TF_CONFIG + MonitoredTrainingSession, async, 2 partitions: every event, a non-chief
    stepping long before SessionManager's 30 s poll, and a ps that exits 0 on ``end``.

    Enough steps that the chief cannot finish before the other worker has its session: a
    non-chief still creating its session when the chief exits waits for it forever (no
    device filters in this program; the controller ends such a worker, see
    tests/program/test_after_the_target.py)."""
    steps = 3000
    cluster = LocalCluster(1, 2, [f"--steps={steps}", "--sync=false", "--partitions=2"],
                           program=EXAMPLES / "tf_config_monitored" / "train.py", pool=shim_pool)
    cluster.watch_exits()
    try:
        codes = cluster.wait(START, names=["worker0", "worker1"])
        assert codes["worker0"] == 0 and codes["worker1"] == 0, outputs(cluster)
        ps = cluster.task("ps0")
        assert ps.proc.poll() is None, "the ps ran past server.join() by itself"
        cluster.send("ps0", "end")
        assert cluster.wait(15, names=["ps0"])["ps0"] == 0, outputs(cluster)
    finally:
        cluster.kill()
    for task in cluster.tasks:
        (ready,) = task.of(protocol.Ready)
        assert ready.address == cluster.spec[ready.role][ready.index]
        (done,) = task.of(protocol.Done)
        # The ps ends inside server.join(), which by hand never returns.
        assert done.reason == (protocol.REASON_ENDED_IN_JOIN if task.name == "ps0"
                               else protocol.REASON_PROGRAM_ENDED)
        assert not task.of(protocol.Error) and "Traceback" not in task.output, task.output
    for name in ("worker0", "worker1"):
        task = cluster.task(name)
        assert_placement(task, partitions=2)
        (init,) = task.of(protocol.Initialized)
        assert init.is_chief == (name == "worker0")
        assert task.of(protocol.Step), task.output
        assert task.of(protocol.Done)[0].global_step >= steps
        # TensorFlow's own logging still reaches the log.
        assert "loss = " in task.output
    other = cluster.task("worker1")
    assert first_step_delay(other) < SESSION_MANAGER_POLL, other.output


def test_flags_example_sync_under_the_shim(shim_pool: Pool) -> None:
    """Flags + Supervisor + SyncReplicasOptimizer: placement names the sync accumulators
    it cannot count, both workers report steps, and a task whose stdin closes (the
    controller gone) exits 143, the chief stuck in its end-of-run hang included.

    Enough steps that the other worker joins before the end: the chief may take every
    gradient of a step itself (it holds the first tokens), and a non-chief that starts late
    then only meets the closed token queue."""
    steps = 1500
    args = ["--ps_hosts={ps_hosts}", "--worker_hosts={worker_hosts}", "--job_name={job}",
            "--task_index={index}", f"--train_steps={steps}", "--sync_replicas=true"]
    cluster = LocalCluster(1, 2, args, program=EXAMPLES / "flags_supervisor" / "train.py", pool=shim_pool)
    cluster.watch_exits()
    try:
        def reached_target() -> bool:
            return any(e.global_step >= steps for t in cluster.tasks
                       for e in t.of(protocol.Step) + t.of(protocol.Done))
        wait_until(reached_target, START, what="the target step")
        for name in ("worker0", "worker1"):
            wait_until(lambda n=name: "training finished" in cluster.task(n).output, 30,
                       what=f"{name}'s last step")
        # The non-chief leaves by itself; the chief may hang in sv.stop() (tensorflow#13779).
        assert cluster.wait(30, names=["worker1"])["worker1"] == 0, outputs(cluster)
        still_running = [t for t in cluster.tasks if t.proc.poll() is None]
        assert cluster.task("ps0") in still_running
        for task in still_running:
            assert task.proc.stdin is not None
            task.proc.stdin.close()
        codes = cluster.wait(15)
    finally:
        cluster.kill()
    assert all(codes[t.name] == EXIT_ORPHANED for t in still_running), (codes, outputs(cluster))
    assert all(codes[t.name] == 0 for t in cluster.tasks if t not in still_running), codes
    for name in ("worker0", "worker1"):
        task = cluster.task(name)
        placement = assert_placement(task, partitions=1)
        assert any("Accumulator" in note for note in placement.unattributed), placement
        assert task.of(protocol.Step), task.output
    assert first_step_delay(cluster.task("worker1")) < SESSION_MANAGER_POLL


def run_shim(tmp_path: Path, source: str, *, prelude: str = "", env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as a script under the shim (after ``prelude`` in the shim's process),
    stdin a pipe held open, as the controller does."""
    script = tmp_path / "program.py"
    script.write_text(source)
    code = f"{prelude}\nfrom trainer.shim.__main__ import main\nmain([{str(script)!r}, 'a', '--b'])"
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "TFDIST_SHIM": "1", **(env or {})}
    return run_held([sys.executable, "-c", code], cwd=tmp_path, env=full_env, timeout=timeout)


def run_held(argv: list[str], *, cwd: Path, env: dict[str, str],
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with its stdin a pipe held open until it has exited, as the controller
    does: EOF would mean "controller gone"."""
    read_end, write_end = os.pipe()
    try:
        with subprocess.Popen(argv, stdin=read_end,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=cwd, env=env) as proc:
            os.close(read_end)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    finally:
        os.close(write_end)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def events(text: str) -> list[protocol.Event]:
    return [e for e in map(protocol.parse_event, text.splitlines()) if e is not None]


def test_a_plain_script_runs_unharmed(tmp_path: Path) -> None:
    """No TensorFlow, no server: its lines and arguments as by hand, then ``done``; and its
    own ``sys.exit(3)`` is its exit status, without ``done``."""
    source = ("import sys\nprint('hello', sys.argv[1:], __name__)\n"
              "print('path0', sys.path[0])\n"
              "if 'tensorflow' in sys.modules: print('tensorflow was imported')\n")
    result = run_shim(tmp_path, source)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "hello ['a', '--b'] __main__"
    assert lines[1] == f"path0 {tmp_path}"
    assert "tensorflow was imported" not in result.stdout
    assert [type(e) for e in events(result.stdout)] == [protocol.Done]
    assert result.stderr == ""
    failing = run_shim(tmp_path, "import sys\nprint('bye')\nsys.exit(3)\n")
    assert failing.returncode == 3 and "bye" in failing.stdout
    assert not events(failing.stdout)


def test_an_event_after_a_line_left_open_starts_a_line_of_its_own(tmp_path: Path) -> None:
    """A program whose last write leaves its line open (``end=""``): its text and the
    shim's ``done`` stay apart, and its own line ends are untouched before that."""
    source = ("import sys\nprint('one', end='')\nprint(' two')\n"
              "sys.stdout.writelines(['three', '\\n'])\nprint('no newline', end='')\n")
    result = run_shim(tmp_path, source)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["one two", "three", "no newline"], lines
    assert [type(e) for e in events(result.stdout)] == [protocol.Done]


HOOKED_PROGRAM = """
import os

import tensorflow.compat.v1 as tf
import tfdist_report

tf.disable_v2_behavior()
cluster = tf.train.ClusterSpec({"worker": ["localhost:" + os.environ["PORT"]]})
server = tf.train.Server(cluster, job_name="worker", task_index=0)
global_step = tf.train.get_or_create_global_step()
weight = tf.get_variable("weight", [4, 2])
train = tf.assign_add(global_step, 1)
with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                       hooks=[tf.train.StopAtStepHook(last_step=5)]) as sess:
    while not sess.should_stop():
        step = sess.run(train)
        tfdist_report.step(step, loss=1.0 / step, accuracy=0.5, examples=8)
tfdist_report.eval(step, accuracy=0.75, loss=0.25, examples=100)
print("program finished")
"""


def test_a_failing_hook_warns_once_and_the_program_completes(tmp_path: Path) -> None:
    """The placement hook raises (patched to): one warning line, every other event still
    comes, the program's own ``tfdist_report`` lines parse, and it exits 0."""
    prelude = ("import trainer.shim.progress as progress\n"
               "def boom(graph): raise ValueError('placement exploded')\n"
               "progress.placement = boom\n")
    result = run_shim(tmp_path, HOOKED_PROGRAM, prelude=prelude,
                      env={"PORT": str(free_ports(1)[0])})
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tfdist shim:")]
    assert warnings == ["tfdist shim: the placement hook failed: placement exploded "
                        "(the program runs on)"], result.stderr
    assert "program finished" in result.stdout
    seen = events(result.stdout)
    kinds = [type(e) for e in seen]
    assert protocol.Placement not in kinds
    assert kinds[:2] == [protocol.Ready, protocol.Initialized] and kinds[-1] is protocol.Done
    steps = [e for e in seen if isinstance(e, protocol.Step)]
    assert steps[-1].global_step == 5 and steps[-1].loss == pytest.approx(0.2)
    assert steps[-1].accuracy == pytest.approx(0.5)
    (evaluation,) = [e for e in seen if isinstance(e, protocol.Eval)]
    assert (evaluation.accuracy, evaluation.examples) == (0.75, 100)
    assert seen[-1].global_step == 5  # type: ignore[attr-defined]


USER_TASK = """
import os, sys
import trainer
from trainer import model
import tui
print("trainer", os.path.dirname(trainer.__file__))
print("tui", tui.WHO, model.NAME)
print("argv", sys.argv[1:], __name__)
print("ours", sorted(n for n in sys.modules if n.split(".")[0] in ("trainer", "tui")
                     and not (getattr(sys.modules[n], "__file__", "") or "").startswith(os.getcwd())))
print("path", [p for p in sys.path if os.path.abspath(p or ".") == REPO])
print("env", REPO in os.environ.get("PYTHONPATH", "").split(os.pathsep))
import tfdist_report
"""


def test_a_users_packages_named_trainer_and_tui_win(tmp_path: Path) -> None:
    """A Cloud ML Engine layout (``trainer/task.py``, ``trainer/model.py``) and a package
    called ``tui``, run as the controller runs them (``python -c BOOTSTRAP -m trainer.task``,
    our checkout on PYTHONPATH, hosts.yaml's folder the working folder): the program imports
    its own, and nothing of ours is left in its modules, path or environment. A module that
    does not exist fails as clearly as a missing script."""
    from trainer.shim import BOOTSTRAP, REPORT_DIR

    for package in ("trainer", "tui"):
        (tmp_path / package).mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "model.py").write_text("NAME = 'their model'\n")
    (tmp_path / "trainer" / "task.py").write_text(f"REPO = {str(REPO)!r}\n{USER_TASK}")
    (tmp_path / "run.py").write_text(f"REPO = {str(REPO)!r}\n{USER_TASK}")  # a script beside them
    (tmp_path / "tui" / "__init__.py").write_text("WHO = 'their tui'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO), str(REPORT_DIR))), "TFDIST_SHIM": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_held([sys.executable, "-c", BOOTSTRAP, *args], cwd=tmp_path, env=env)

    for form in (("-m", "trainer.task"), ("run.py",)):
        result = run(*form, "--job-dir", "x")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[:6] == [f"trainer {tmp_path / 'trainer'}", "tui their tui their model",
                             "argv ['--job-dir', 'x'] __main__", "ours []", "path []", "env False"]
        assert [type(e) for e in events(result.stdout)] == [protocol.Done]
    missing = run("-m", "trainer.tsk")
    assert missing.returncode == 2 and not missing.stdout
    assert missing.stderr.strip() == \
        f"tfdist shim: error: no module named trainer.tsk (looked in {tmp_path} and on the path)"


def test_a_program_that_raises_shows_the_traceback_python_would(tmp_path: Path) -> None:
    """Its own frames, as ``python program.py`` prints them: not the shim's and runpy's
    first (five lines of ours, half of the last ten lines a failed task's summary quotes)."""
    (tmp_path / "helper.py").write_text("def load():\n    raise ValueError('no such column: lable')\n")
    source = "import helper\nhelper.load()\n"
    shimmed = run_shim(tmp_path, source)
    by_hand = subprocess.run([sys.executable, str(tmp_path / "program.py"), "a", "--b"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert by_hand.stderr.startswith("Traceback"), by_hand.stderr
    assert shimmed.returncode == by_hand.returncode == 1
    assert shimmed.stderr == by_hand.stderr
    (error,) = events(shimmed.stdout)
    assert isinstance(error, protocol.Error) and error.message == "no such column: lable"


#: Kubeflow's TF1 dist-mnist shape: the ps joins, and its script falls through after join()
#: into the chief's code. By hand join() never returns, so that code never runs.
FALLS_THROUGH = """
import sys
import tensorflow as tf
ps, worker = sys.argv[1:3]
cluster = tf.train.ClusterSpec({"ps": [ps], "worker": [worker]})
server = tf.distribute.Server(cluster, job_name="ps", task_index=0)
server.join()
print("ran past join(): now the chief's code", flush=True)
open(sys.argv[3], "w").write("ran past join()")
"""


def test_a_ps_ends_inside_join_and_never_runs_what_follows_it(tmp_path: Path) -> None:
    script, mark = tmp_path / "dist_mnist.py", tmp_path / "after-join"
    script.write_text(FALLS_THROUGH)
    ps, worker = (f"localhost:{port}" for port in free_ports(2))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TFDIST_SHIM": "1"}
    with (tmp_path / "stderr").open("w+") as stderr, \
            subprocess.Popen([sys.executable, "-m", "trainer.shim", str(script), ps, worker, str(mark)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                             cwd=tmp_path, env=env) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        seen = []
        for line in proc.stdout:  # until its server is up (the controller sends `end` only then)
            seen.append(line)
            if isinstance(protocol.parse_event(line), protocol.Ready):
                break
        proc.stdin.write("end\n")
        proc.stdin.flush()
        out = proc.stdout.read()  # to its exit, stdin still open (EOF would mean "controller gone")
        proc.wait(timeout=60)
        stderr.seek(0)
        err = stderr.read()
    assert proc.returncode == 0, err
    assert not mark.exists() and "ran past join()" not in out
    (done,) = [e for e in events("".join(seen) + out) if isinstance(e, protocol.Done)]
    assert done.reason == protocol.REASON_ENDED_IN_JOIN
    assert "ps0: ended by the controller in server.join()" in out
