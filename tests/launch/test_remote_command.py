"""The remote command line, without SSH: run it the way sshd does (``$SHELL -c LINE``) and
check that every value arrives literally, whatever it contains."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.launch.ssh.remote_command import (
    EXIT_NO_WORKDIR,
    PID_PREFIX,
    RemoteCommand,
    parse_pid_line,
    signal_groups_line,
)

SHELLS = [shell for shell in ("/bin/sh", "/bin/bash", "/bin/dash") if Path(shell).exists()]
#: Prints its argv, environment additions, cwd and PYTHONPATH as JSON.
REPORT = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), "
          "'env': {k: v for k, v in os.environ.items() if k.startswith('T_')}, "
          "'path': os.environ.get('PYTHONPATH', '')}))")

# Text a shell would act on if it were pasted in unquoted.
NASTY = ["$(touch TRAP)", "`touch TRAP`", "; touch TRAP", "' ; touch TRAP; '", '" ; touch TRAP; "',
         "$HOME", "${PATH}", "a\nb", "*", "~", "-n", "--", "\\", "!x", "a b", "", "x=y", "%s"]


def run_line(command: RemoteCommand, shell: str, cwd: Path) -> tuple[int, list[str], str]:
    """Run ``command`` as sshd would, its environment on stdin; (status, stdout lines, stderr)."""
    result = subprocess.run([shell, "-c", command.shell_line()], input=command.env_input(),
                            capture_output=True, cwd=cwd, timeout=30,
                            env={"PATH": os.environ["PATH"], "HOME": str(cwd), "PYTHONPATH": "/inherited"})
    return (result.returncode, result.stdout.decode("utf-8", "surrogateescape").splitlines(),
            result.stderr.decode("utf-8", "replace"))


@pytest.mark.parametrize("shell", SHELLS)
def test_values_arrive_literally_and_nothing_runs(tmp_path: Path, shell: str) -> None:
    trap = tmp_path / "TRAP"
    values = [v.replace("TRAP", str(trap)) for v in NASTY]
    workdir = tmp_path / "dir $(touch TRAP) ; touch TRAP"
    workdir.mkdir()
    command = RemoteCommand(argv=(sys.executable, "-c", REPORT, *values),
                            env={f"T_{i}": v for i, v in enumerate(values)}, cwd=str(workdir),
                            python_path="/deployed $(touch x)")
    status, lines, err = run_line(command, shell, tmp_path)
    assert status == 0, err
    assert parse_pid_line(lines[0]) is not None
    report = json.loads(lines[1])
    assert report["argv"] == values
    assert report["env"] == {f"T_{i}": v for i, v in enumerate(values)}
    assert report["cwd"] == str(workdir)
    assert report["path"] == "/deployed $(touch x):/inherited"
    assert not list(tmp_path.rglob("TRAP")) and not list(tmp_path.rglob("x"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                               max_size=30), max_size=4))
def test_any_text_arrives_literally(tmp_path: Path, values: list[str]) -> None:
    # -S: no site import, so each of the many examples starts Python quickly.
    command = RemoteCommand(argv=(sys.executable, "-S", "-c", REPORT, *values),
                            env={f"T_{i}": v for i, v in enumerate(values)})
    status, lines, err = run_line(command, "/bin/sh", tmp_path)
    assert status == 0, err
    report = json.loads("\n".join(lines[1:]))
    assert report["argv"] == values
    assert report["env"] == {f"T_{i}": v for i, v in enumerate(values)}


def test_no_environment_value_is_in_the_command_line() -> None:
    command = RemoteCommand(argv=("true",), env={"AWS_SECRET_ACCESS_KEY": "s3cr3t-value\nline2"})
    assert "s3cr3t" not in command.shell_line() and "AWS_SECRET" not in command.shell_line()


def test_the_task_keeps_its_stdin_after_the_environment(tmp_path: Path) -> None:
    command = RemoteCommand(argv=(sys.executable, "-c", "import sys, os; print(os.environ['T_A'] + '|' + "
                                  "sys.stdin.read())"), env={"T_A": "x\n"})
    result = subprocess.run(["/bin/sh", "-c", command.shell_line()], input=command.env_input() + b"go\n",
                            capture_output=True, cwd=tmp_path, timeout=30)
    assert result.stdout.decode().splitlines()[1:] == ["x", "|go", ""]  # "x\n", then stdin


def test_the_printed_pid_is_the_process_itself(tmp_path: Path) -> None:
    command = RemoteCommand(argv=(sys.executable, "-c", "import os; print(os.getpid())"), env={})
    _, lines, _ = run_line(command, "/bin/sh", tmp_path)
    assert lines[0] == f"{PID_PREFIX}{lines[1]}"


def test_an_explicit_pythonpath_comes_after_the_deployed_trainer(tmp_path: Path) -> None:
    command = RemoteCommand(argv=(sys.executable, "-c", REPORT), env={"PYTHONPATH": "/mine"},
                            python_path="/deployed")
    _, lines, _ = run_line(command, "/bin/sh", tmp_path)
    assert json.loads(lines[1])["path"] == "/deployed:/mine"


def test_a_missing_directory_is_a_distinct_exit_status(tmp_path: Path) -> None:
    command = RemoteCommand(argv=("true",), env={}, cwd=str(tmp_path / "missing"))
    status, lines, _ = run_line(command, "/bin/sh", tmp_path)
    assert status == EXIT_NO_WORKDIR
    assert lines == []


@pytest.mark.parametrize("env", [{"BAD NAME": "x"}, {"X": "a\0b"}, {"1X": "x"}])
def test_invalid_environment_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        RemoteCommand(argv=("true",), env=env)


def test_signal_lines_are_fixed_text() -> None:
    assert signal_groups_line([4242], "TERM") == "kill -s TERM -- -4242"
    assert signal_groups_line([4242, 4343], "KILL") == "kill -s KILL -- -4242 -4343"
    for bad in ([], [0], [1], [-5], [4242, 1]):
        with pytest.raises(ValueError):
            signal_groups_line(bad, "TERM")
    with pytest.raises(ValueError):
        signal_groups_line([4242], "TERM; reboot")


def test_shells_exist() -> None:
    assert shutil.which("sh")
