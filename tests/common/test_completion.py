"""tui.common.completion: argcomplete's completion scripts, driven by a real bash, zsh and fish,
complete the subcommands, their options and choices, the main command's options and hosts
files."""

from __future__ import annotations

import os
import re
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


#: zsh: the completion system loaded (compinit) and the script eval'ed as a user's ~/.zshrc
#: would, then its function called with the line zsh hands a completion widget (BUFFER, CURSOR,
#: words). Only the last step, zsh listing what ``_describe`` is given, is replaced by
#: printing it: a completion widget runs only in an interactive line editor.
_ZSH = r"""
autoload -U compinit && compinit -u -D
eval "$(tfdist-tui completion zsh)"
_describe() { print -rl -- "${(@P)2}" }
BUFFER="$1"; CURSOR=${#BUFFER}; words=(${(z)BUFFER}); [[ "$BUFFER" == *" " ]] && words+=("")
_python_argcomplete
"""
#: fish: the script sourced as a user's config.fish would, then fish's own ``complete -C``
#: (what TAB runs) asked for the line's completions.
_FISH = r"""
tfdist-tui completion fish | source
complete -C "$argv[1]"
"""
_SCRIPTS = {"bash": ["bash", "-c", _BASH, "bash"], "zsh": ["zsh", "-f", "-c", _ZSH, "zsh"],
            "fish": ["fish", "-c", _FISH]}


def completions(line: str, folder: Path, shell: str = "bash") -> list[str]:
    bindir = Path(sys.executable).parent  # where the console script is installed
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    result = subprocess.run([*_SCRIPTS[shell], line], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # zsh's entries are "word:description" (a colon in the word escaped), fish's "word<TAB>description".
    words = [re.split(r"(?<!\\):|\t", word.strip())[0].replace("\\:", ":")
             for word in result.stdout.splitlines() if word.strip()]
    return [word for word in words if word]


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


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_complete_commands_options_and_choices(shell: str, tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    (tmp_path / "hosts.yaml").write_text("cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    assert completions("tfdist-tui ex", tmp_path, shell) == ["export"]
    assert set(completions("tfdist-tui ", tmp_path, shell)) >= {*cli.SUBCOMMANDS, "hosts.yaml"}
    assert sorted(completions("tfdist-tui hosts.yaml --mode ", tmp_path, shell)) == ["async", "sync"]
    assert "--stall-timeout" in completions("tfdist-tui hosts.yaml --st", tmp_path, shell)
    assert sorted(completions("tfdist-tui export hosts.yaml --format ", tmp_path, shell)) == \
        ["shell", "slurm", "tf-config", "tfjob"]
    assert "--json" in completions("tfdist-tui check hosts.yaml --j", tmp_path, shell)


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_prints_each_shells_script(shell: str) -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "completion", shell], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "tfdist-tui" in result.stdout and "_ARGCOMPLETE" in result.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "completion", "tcsh"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "invalid choice: 'tcsh'" in result.stderr
