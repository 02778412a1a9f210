"""The command line: arguments, config errors, overrides, the lazy UI import, exit codes."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

import psutil
import pytest

from tests.support import wait_until
from tests.support.clirun import REPO, write_hosts
from tui import cli, headless
from tui.common.completion import package_version
from tui.common.exit_codes import ExitCode
from tui.config.cluster import Job, RestartMode
from tui.core.options import RunOptions


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    """Replace the headless front end; record the options it would have got."""
    seen: list[RunOptions] = []

    def fake_main(options: RunOptions) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr(headless, "main", fake_main)
    return seen


def test_overrides_and_run_dir_reach_the_front_end(tmp_path: Path, captured: list[RunOptions]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"mode": "async", "steps": 100})
    code = cli.main([str(hosts), "--no-ui", "--mode", "sync", "--partitions", "3", "--placement",
                     "round_robin", "--steps", "7", "--run-dir", str(tmp_path / "elsewhere"),
                     "--timeout", "2.5"])
    assert code == 0
    (options,) = captured
    training = options.config.training
    assert (training.mode.value, training.partitions, training.placement.value, training.steps) == (
        "sync", 3, "round_robin", 7)
    assert options.runs_root == tmp_path / "elsewhere"
    assert options.timeout == 2.5 and not options.json_output


def test_restart_flag_sets_every_jobs_policy(tmp_path: Path, captured: list[RunOptions]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml")
    assert cli.main([str(hosts), "--no-ui", "--restart", "on-failure"]) == 0
    (options,) = captured
    for job in (Job.PS, Job.WORKER):
        policy = options.config.restart_policy(job)
        assert policy.policy is RestartMode.ON_FAILURE and policy.max_restarts == 3
    assert cli.main([str(hosts), "--no-ui", "--restart", "sometimes"]) == ExitCode.USAGE


def test_run_dir_defaults_to_the_configs(tmp_path: Path, captured: list[RunOptions]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "from-config")
    assert cli.main([str(hosts), "--json"]) == 0  # --json implies --no-ui
    assert captured[0].runs_root == tmp_path / "from-config"
    assert captured[0].json_output


@pytest.mark.parametrize("args", [
    [],
    ["--mode", "bogus"],
    ["--steps", "0"],
    ["--partitions", "x"],
    ["--timeout", "-1"],
    ["--placement", "random"],
    ["--unknown"],
])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], captured: list[RunOptions],
                             capsys: pytest.CaptureFixture[str]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml")
    argv = [str(hosts), "--no-ui", *args] if args else []
    assert cli.main(argv) == ExitCode.USAGE
    assert "usage: tfdist-tui" in capsys.readouterr().err
    assert captured == []


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "exit codes: 0 finished cleanly" in capsys.readouterr().out


@pytest.mark.parametrize("content, expected", [
    ("cluster:\n\tps: [localhost:2222]\n", ":2:1: "),
    ("cluster:\n  ps: [localhost:99999]\n  worker: [localhost:2223]\n", ":2:"),
    ("[1, 2]\n", "hosts.yaml"),
])
def test_config_errors_exit_2_with_a_location_and_no_traceback(
        tmp_path: Path, content: str, expected: str, captured: list[RunOptions],
        capsys: pytest.CaptureFixture[str]) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(content)
    assert cli.main([str(hosts), "--no-ui"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {hosts}") and expected in err
    assert "Traceback" not in err
    assert captured == []


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([str(tmp_path / "nope.yaml"), "--no-ui"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'nope.yaml'}")


def test_an_invalid_override_combination_exits_2(tmp_path: Path, captured: list[RunOptions],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml", training={"batch_size": 64, "gpus": 3})
    assert cli.main([str(hosts), "--no-ui", "--steps", "5"]) == ExitCode.USAGE
    assert "batch" in capsys.readouterr().err


def test_without_no_ui_a_missing_ui_exits_2_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "tui.app.main", None)  # makes `import tui.app.main` fail
    hosts = write_hosts(tmp_path / "hosts.yaml")
    assert cli.main([str(hosts)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: the terminal UI cannot be loaded (") and "use --no-ui" in err


def test_the_cores_process_and_its_warm_pool_start_before_the_app_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's core (and the warm pool its session prestarts) does not wait for Textual to
    load: its TensorFlow import overlaps the app's own start."""
    found: list[psutil.Process] = []

    def run(options: RunOptions, core: object) -> int:
        # The app's module is only being loaded now: the core must run already, and its pool.
        process = core.process  # type: ignore[attr-defined]
        assert process.poll() is None

        def pool() -> psutil.Process | None:
            return next((p for p in psutil.Process(process.pid).children()
                         if "trainer.warm" in " ".join(p.cmdline())), None)

        found.append(wait_until(pool, 60, "the core's warm pool"))
        core.close()  # type: ignore[attr-defined]
        return 0

    real_import = importlib.import_module

    def import_module(name: str, package: str | None = None) -> object:
        return types.SimpleNamespace(run=run) if name == "tui.app.main" else real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", import_module)
    hosts = write_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    assert cli.main([str(hosts)]) == 0
    assert len(found) == 1
    # Closed with the core: the pool is gone too.
    assert wait_until(lambda: not found[0].is_running() or found[0].status() == psutil.STATUS_ZOMBIE, 30,
                      "the pool to end with the core")


def test_python_dash_m_tui_runs_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "usage: tfdist-tui" in result.stdout


def test_stall_flags_reach_the_supervisor_options(tmp_path: Path, captured: list[RunOptions]) -> None:
    hosts = write_hosts(tmp_path / "hosts.yaml")
    assert cli.main([str(hosts), "--no-ui", "--stall-timeout", "5", "--on-stall", "restart"]) == 0
    assert cli.main([str(hosts), "--no-ui", "--stall-timeout", "0"]) == 0
    first, second = (options.supervisor_options() for options in captured)
    assert (first.stall_timeout, first.on_stall.value) == (5.0, "restart")
    assert (second.stall_timeout, second.on_stall.value) == (0.0, "warn")


def test_more_gpus_than_the_host_has_exits_2_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the probe then finds no GPU on any machine
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("cluster:\n  ps: [localhost:auto]\n  worker: [{host: localhost, gpus: 1}]\n"
                     f"run_dir: {tmp_path / 'runs'}\n")
    assert cli.main([str(hosts), "--no-ui"]) == ExitCode.USAGE
    assert "error: host localhost: tasks ask for 1 GPU (worker0: 1) but it has 0" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # nothing started, not even a run directory


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tfdist-tui {package_version()}"


def test_help_lists_every_subcommand_as_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "tfdist-tui COMMAND ..." in out
    for name, command in cli.SUBCOMMANDS.items():
        assert f"  {name}  " in out and command.summary in out
        # Each one answers --help with its own parser, as completion reads it.
        assert command.make_parser().prog == f"tfdist-tui {name}"


def test_python_dash_m_tui_is_the_command(tmp_path: Path) -> None:
    """The same exit codes and output as the console script, subcommands included."""
    for argv in (["--version"], ["completion", "zsh"], ["schema", "extra"], [str(tmp_path / "none.yaml")]):
        module = subprocess.run([sys.executable, "-m", "tui", *argv], cwd=REPO, capture_output=True,
                                text=True, timeout=60)
        script = subprocess.run([str(Path(sys.executable).parent / "tfdist-tui"), *argv], cwd=REPO,
                                capture_output=True, text=True, timeout=60,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        assert (module.returncode, module.stdout, module.stderr) == \
            (script.returncode, script.stdout, script.stderr), argv
    assert module.returncode == ExitCode.USAGE

