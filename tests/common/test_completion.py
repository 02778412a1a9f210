"""tui.common.completion: argcomplete's completion scripts, driven by a real bash, complete the
subcommands, their options and choices, the main command's options and hosts files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clirun import REPO
from tui import cli
from tui.common.completion import SHELLS

#: Loads the script as a user's ~/.bashrc would, then asks for the completions of $1 as bash
#: does when TAB is pressed at its end.
_BASH = r"""
eval "$(tfdist-tui completion bash)"
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_python_argcomplete tfdist-tui "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def completions(line: str, folder: Path) -> list[str]:
    bindir = Path(sys.executable).parent  # where the console script is installed
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    result = subprocess.run(["bash", "-c", _BASH, "bash", line], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [word.strip() for word in result.stdout.splitlines() if word.strip()]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_choices_and_hosts_files(tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text("cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    (tmp_path / "notes.txt").write_text("")
    assert completions("tfdist-tui ex", tmp_path) == ["export"]
    assert set(completions("tfdist-tui ", tmp_path)) >= {*cli.SUBCOMMANDS, "hosts.yaml"}
    assert "notes.txt" not in completions("tfdist-tui ", tmp_path)
    assert completions("tfdist-tui h", tmp_path) == ["hosts.yaml"]
    assert completions("tfdist-tui hosts.yaml --mode ", tmp_path) == ["sync", "async"]
    assert "--stall-timeout" in completions("tfdist-tui hosts.yaml --st", tmp_path)
    assert completions("tfdist-tui export hosts.yaml --format ", tmp_path) == ["tfjob", "tf-config", "shell",
                                                                               "slurm"]
    assert set(completions("tfdist-tui completion ", tmp_path)) >= set(SHELLS)


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_prints_each_shells_script(shell: str) -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "completion", shell], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "tfdist-tui" in result.stdout and "_ARGCOMPLETE" in result.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "completion", "tcsh"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "invalid choice: 'tcsh'" in result.stderr
