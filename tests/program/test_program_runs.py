"""Users' own programs through the headless controller, with real processes: a plain script
that the shim cannot hook, a cluster restart after a ps is killed, bad program: values."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from tests.program.helpers import load, processes_of_runs, program_folder, run_program
from trainer import protocol
from trainer.shim import BOOTSTRAP
from tui import cli
from tui.common.exit_codes import ExitCode
from tui.core import hints
from tui.core.events import ControllerEvent, RunFinished, TrainerEvent
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

STEP_PATTERN = "'Step: (?P<step>\\d+).*Cost: (?P<loss>[0-9.]+)'"


def summary_of(events: list[ControllerEvent]) -> RunFinished:
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    return finished


async def test_a_plain_script_runs_under_the_shim_and_is_measured_from_its_log(tmp_path: Path) -> None:
    config = load(program_folder(tmp_path, "plain.py", f"""\
        program:
          command: python plain.py --job={{job}} --index={{index}} --steps={{steps}}
          metrics: [{STEP_PATTERN}]
        cluster: {{ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}}
        training: {{steps: 6}}
        """))
    runs = tmp_path / "runs"
    run = await run_program(config, runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    summary = summary_of(run.events).summary
    assert (summary.global_step, summary.target, summary.final_loss) == (6, 6, 0.167)
    assert {t.name: t.state for t in summary.tasks} == dict.fromkeys(("ps0", "worker0", "worker1"),
                                                                     TaskState.SUCCEEDED)
    (run_dir,) = runs.iterdir()
    command = json.loads((run_dir / "tasks" / "worker1.json").read_text())["argv"]
    assert command[1:4] == ["-c", BOOTSTRAP, "plain.py"]
    assert "worker1 | Step: 6 (worker1), Cost: 0.167" in run.out
    assert not processes_of_runs(runs)


async def test_variables_assigned_in_the_command_reach_the_program_run_by_the_host_s_python(
        tmp_path: Path) -> None:
    # Written as in a shell: the variables are the environment, the program is python, run
    # with the controller's Python under the shim (not "cannot run GREETING=...").
    folder = tmp_path / "program"
    (folder / "lib").mkdir(parents=True)
    (folder / "lib" / "greeting.py").write_text("WORD = 'from lib'\n")
    (folder / "echo.py").write_text(dedent("""\
        import os, sys
        import greeting
        print("echo", os.environ["GREETING"], greeting.WORD, sys.executable == os.environ["WANT_PYTHON"],
              flush=True)
        """))
    (folder / "hosts.yaml").write_text(dedent(f"""\
        program:
          command: env GREETING=hi-{{job}}{{index}} PYTHONPATH=lib WANT_PYTHON={sys.executable} python echo.py
        cluster: {{ps: [localhost:auto], worker: [localhost:auto]}}
        """))
    runs = tmp_path / "runs"
    run = await run_program(load(folder / "hosts.yaml"), runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    assert "worker0 | echo hi-worker0 from lib True" in run.out
    assert "ps0     | echo hi-ps0 from lib True" in run.out
    assert "running GREETING=hi-{job}{index} PYTHONPATH=lib WANT_PYTHON=" in run.out
    (run_dir,) = runs.iterdir()
    command = json.loads((run_dir / "tasks" / "worker0.json").read_text())["argv"]
    assert command[1:4] == ["-c", BOOTSTRAP, "echo.py"]
    assert not processes_of_runs(runs)


async def test_a_python_given_by_its_path_runs_the_script_under_the_shim(tmp_path: Path) -> None:
    # /opt/venv/bin/python train.py runs a .py file with Python: under the shim, as the bare
    # "python" does, with that interpreter (not the host's python: setting).
    config = load(program_folder(tmp_path, "plain.py", f"""\
        program:
          command: {sys.executable} plain.py --job={{job}} --index={{index}} --steps={{steps}}
          metrics: [{STEP_PATTERN}]
        cluster: {{ps: [localhost:auto], worker: [localhost:auto]}}
        training: {{steps: 3}}
        """))
    runs = tmp_path / "runs"
    run = await run_program(config, runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    assert summary_of(run.events).summary.global_step == 3
    (run_dir,) = runs.iterdir()
    command = json.loads((run_dir / "tasks" / "worker0.json").read_text())["argv"]
    assert command[:4] == [sys.executable, "-c", BOOTSTRAP, "plain.py"]
    assert not processes_of_runs(runs)


async def test_a_program_s_multiprocessing_pools_start_as_by_hand(tmp_path: Path) -> None:
    # spawn and forkserver children import the script again by its __main__'s __file__:
    # forked from a warm pool that had started elsewhere, they looked for it there.
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "pools.py").write_text(dedent("""\
        import multiprocessing as mp

        def square(x):
            return x * x

        if __name__ == "__main__":
            for method in ("spawn", "forkserver"):
                with mp.get_context(method).Pool(2) as pool:
                    print(method, pool.map(square, range(4)), flush=True)
        """))
    (folder / "hosts.yaml").write_text("program: {command: python pools.py}\n"
                                       "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    runs = tmp_path / "runs"
    run = await run_program(load(folder / "hosts.yaml"), runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    for method in ("spawn", "forkserver"):
        assert f"worker0 | {method} [0, 1, 4, 9]" in run.out, run.out[-3000:]
    assert "Traceback" not in run.out
    assert not processes_of_runs(runs)


async def test_a_progress_bar_redrawn_in_place_is_read_as_it_goes(tmp_path: Path) -> None:
    # tqdm's way: each state after a \r on stderr, a newline only at the end of the loop.
    # Its steps (and its signs of life) come while it trains, not all at its end.
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "bar.py").write_text(dedent("""\
        import sys, time
        if sys.argv[1] == "worker":
            for i in range(1, 41):
                sys.stderr.write(f"\\rtraining: {i}/40 [00:01<00:01, 20.00it/s, loss={1 / i:.4f}]")
                sys.stderr.flush()
                time.sleep(0.05)
            sys.stderr.write("\\n")
        """))
    (folder / "hosts.yaml").write_text(dedent("""\
        program:
          command: python bar.py {job}
          metrics: ['(?P<step>\\d+)/40 .*loss=(?P<loss>[0-9.]+)']
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        """))
    runs = tmp_path / "runs"
    run = await run_program(load(folder / "hosts.yaml"), runs)
    assert run.code is ExitCode.OK, run.out[-3000:]
    steps = [e.event.global_step for e in run.events
             if isinstance(e, TrainerEvent) and isinstance(e.event, protocol.Step)]
    assert len(steps) > 5 and steps[-1] == 40 and steps == sorted(steps), steps
    assert summary_of(run.events).summary.final_loss == 0.025
    assert "worker0 | training: 20/40 [00:01<00:01, 20.00it/s, loss=0.0500]" in run.out
    assert not processes_of_runs(runs)


async def test_a_killed_ps_restarts_the_cluster_which_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    config = load(program_folder(tmp_path, "toy_cluster.py", f"""\
        program:
          command: >-
            python toy_cluster.py --job={{job}} --address={{address}} --ps={{ps_hosts}}
            --steps={{steps}} --ckpt={{checkpoint_dir}}
          shim: false
          metrics: [{STEP_PATTERN}]
        cluster: {{ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}}
        training: {{steps: 100}}
        restart: {{policy: on-failure, max_restarts: 1, backoff: 0.2}}
        """))
    runs = tmp_path / "runs"
    supervisor = Supervisor(config, runs_root=runs, options=SupervisorOptions(grace=1.0))
    kills: list[int] = []
    after_kill: list[int] = []

    def kill_the_ps(event: ControllerEvent) -> None:
        if not isinstance(event, TrainerEvent) or not isinstance(event.event, protocol.Step):
            return
        if kills:
            after_kill.append(event.event.global_step)
        elif event.event.global_step >= 15 and all(t.state is TaskState.RUNNING for t in supervisor.tasks()):
            # Once the whole cluster is up: a ps that fails then takes the cluster with it.
            pid = next(t.pid for t in supervisor.tasks() if t.name == "ps0")
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            kills.append(event.event.global_step)

    supervisor.subscribe(kill_the_ps)
    run = await run_program(config, runs, supervisor)
    assert kills and run.code is ExitCode.OK, run.out[-3000:]
    summary = summary_of(run.events).summary
    (incident,) = summary.incidents
    assert (incident.kind.value, incident.task) == ("cluster_restart", "ps0")
    # Training went on from the program's checkpoint, not from the start.
    assert after_kill and min(after_kill) > kills[0] - 5 and summary.global_step >= 100
    ps0 = next(t for t in summary.tasks if t.name == "ps0")
    assert ps0.state is TaskState.SUCCEEDED and "after every worker finished" in ps0.reason
    assert not processes_of_runs(runs)


async def test_a_program_whose_import_fails_on_the_host_s_python_gets_the_module_missing_hint(
        tmp_path: Path) -> None:
    folder = tmp_path / "program"
    folder.mkdir()
    (folder / "needs.py").write_text("import tfdist_no_such_package_here\n")
    (folder / "hosts.yaml").write_text(dedent("""\
        program:
          command: python needs.py
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        restart: {policy: never}
        """))
    run = await run_program(load(folder / "hosts.yaml"), tmp_path / "runs")
    assert run.code is ExitCode.TASK_FAILED, run.out[-3000:]
    assert "ModuleNotFoundError: No module named 'tfdist_no_such_package_here'" in run.out
    assert f"hint: {hints.MODULE_MISSING}" in run.out, run.out[-3000:]
    assert not processes_of_runs(tmp_path / "runs")


async def test_a_program_that_raises_a_bare_exception_fails_naming_it(tmp_path: Path) -> None:
    """Keras' failed download raises ``Exception``, not an ``...Error``: the failure's reason
    names it as it names any error a task died of."""
    path = program_folder(tmp_path, "offline_dataset.py", """\
        program:
          command: python offline_dataset.py
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        """)
    run = await run_program(load(path), tmp_path / "runs")
    assert run.code is ExitCode.TASK_FAILED, run.out[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "(Exception: URL fetch failure on http://127.0.0.1:9/digits.npz" in summary["reason"], summary
    assert not processes_of_runs(tmp_path / "runs")


@pytest.mark.parametrize(("command", "where", "message"), [
    ("python train.py --lr={lrate}", "hosts.yaml:2:33:", "unknown placeholder {lrate}"),
    ("python missing.py", "hosts.yaml:2:19:", "script 'missing.py' does not exist"),
    ("''", "hosts.yaml:2:3:", "empty command"),
])
def test_bad_program_values_exit_2_with_a_location_and_nothing_started(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, where: str, message: str) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"program:\n  command: {command}\ncluster: {{ps: [localhost:auto], "
                     f"worker: [localhost:auto]}}\ntraining: {{lr: 0.1}}\n")
    assert cli.main([str(hosts), "--no-ui"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert where in err and message in err, err
    assert not (tmp_path / "runs").exists()


def test_overrides_a_program_ignores_are_warned_about(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    hosts = tmp_path / "hosts.yaml"
    with socket.socket() as taken:  # the preflight refuses the run: nothing starts
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        hosts.write_text(f"program: {{command: 'python train.py --steps={{steps}}'}}\n"
                         f"cluster: {{ps: ['localhost:{port}'], worker: [localhost:auto]}}\n")
        assert cli.main([str(hosts), "--no-ui", "--mode", "sync", "--partitions", "2", "--steps", "5"]) \
            == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "warning: --mode: the program's command uses neither {mode} nor {sync}" in err
    assert "warning: --partitions: the program's command uses no {partitions}" in err
    assert "--steps" not in err
    assert not (tmp_path / "runs").exists()
