"""Names stay names in what export and import write (issue 33): a hosts file whose name holds
newlines and shell or YAML of its own puts none of it into the sbatch script (checked under
the real sbatch: every #SBATCH directive kept, nothing injected run), the TFJob manifest
(still one document), the shell commands or the imported hosts.yaml (no injected keys)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import wait_until
from tests.support.clirun import REPO
from tests.support.slurm import SlurmCluster
from tests.support.slurm_helpers import slurm_hosts
from tui import cli
from tui.common.exit_codes import ExitCode

#: A file name that is code wherever it is pasted raw: shell, YAML (a second document, a
#: program to run) and a comment's end.
EVIL = "x\ntouch PWNED\n---\nkind: Pod\nprogram: {command: touch PWNED2}\n#.yaml"


def _hosts(folder: Path, **entry: object) -> Path:
    made = slurm_hosts(folder / "plain.yaml", workers=1, entry={"time": "00:07:00", **entry},
                       training={"steps": 5})
    evil = folder / EVIL
    made.rename(evil)
    return evil


def _export(hosts: Path, fmt: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tui", "export", str(hosts), "--format", fmt],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _sbatch_head(script: str) -> list[str]:
    """The lines sbatch reads directives from: the first ones, up to the first command."""
    lines = script.splitlines()[1:]
    return [line for line in lines[:next(i for i, line in enumerate(lines) if not line.startswith("#"))]]


def test_the_sbatch_script_keeps_every_directive_and_runs_nothing_of_the_name(tmp_path: Path) -> None:
    script = _export(_hosts(tmp_path, extra=["--comment", "a b; touch PWNED3", "--qos=normal"]), "slurm")
    head = _sbatch_head(script)
    assert all(line.startswith("#") for line in head) and "PWNED" not in "".join(
        line for line in script.splitlines() if not line.startswith("#"))
    directives = [line for line in head if line.startswith("#SBATCH ")]
    assert "#SBATCH --time=00:07:00" in directives and "#SBATCH --job-name=tfdist-hpc" in directives
    assert "#SBATCH --comment 'a b; touch PWNED3'" in directives  # one option, its value quoted
    # bash -n: the whole script is one well-formed program.
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


@pytest.mark.slurm
@pytest.mark.timeout(120)
def test_under_real_sbatch_the_directives_hold_and_nothing_injected_runs(slurm: SlurmCluster,
                                                                      tmp_path: Path) -> None:
    script = tmp_path / "job.sbatch"
    script.write_text(_export(_hosts(tmp_path), "slurm"))
    submitted = slurm.run("sbatch", "--parsable", f"--output={tmp_path}/job.out", f"--chdir={tmp_path}",
                          str(script))
    job = submitted.stdout.strip().split(";")[0]
    try:
        shown = slurm.run("scontrol", "show", "job", job).stdout
        assert {"JobName=tfdist-hpc", "TimeLimit=00:07:00"} <= set(shown.split()), shown
        # The script's first command line has run once its first step is announced; an
        # injected line would have come before it.
        wait_until(lambda: (tmp_path / "job.out").exists() and "tfdist: ps0 on" in
                   (tmp_path / "job.out").read_text(), 60, "the script reached its first step")
    finally:
        slurm.run("scancel", job, check=False)
    assert not list(tmp_path.glob("PWNED*")), "the file's name ran as a command"


def test_the_tfjob_manifest_stays_one_document(tmp_path: Path) -> None:
    text = _export(_hosts(tmp_path), "tfjob")
    documents = list(yaml.safe_load_all(text))
    assert len(documents) == 1 and documents[0]["kind"] == "TFJob", documents
    assert "program" not in documents[0]


def test_shell_commands_carry_no_code_of_the_name(tmp_path: Path) -> None:
    text = _export(_hosts(tmp_path), "shell")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert "PWNED" not in "".join(shlex.split(line)[:1]), line
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_import_writes_the_name_as_a_comment_only(tmp_path: Path) -> None:
    source = tmp_path / EVIL
    source.write_text(json.dumps({"cluster": {"ps": ["localhost:2222"], "worker": ["localhost:2223"]}}))
    out = tmp_path / "imported.yaml"
    assert cli.main(["import", str(source), "-o", str(out)]) == ExitCode.OK
    document = yaml.safe_load(out.read_text())
    assert set(document) == {"cluster"}, document  # no program:, no kind:
    assert all(line.startswith("#") or not line or line.startswith((" ", "cluster"))
               for line in out.read_text().splitlines()), out.read_text()
