"""A host's ``env:`` holds secrets: the attack of a second user on the machine, who polls
every process's command line in /proc during an SSH run (probe, port checks, leftover
search, resources, ``ss``, each task) and reads the run directory. Neither may show them."""

from __future__ import annotations

import asyncio
import hashlib
import stat
import threading
from pathlib import Path

import pytest
import yaml

from tests.program.helpers import program_folder, run_program
from tests.support.ssh import SshServer, describe, kill, wait_nothing_left
from tui.common.exit_codes import ExitCode
from tui.config.load import load_config
from tui.core.supervisor.lifecycle import Supervisor
from tui.launch.router import Router

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzEXAMPLEKEY"


class CommandLineSpy:
    """What a process of another user can do: read /proc/*/cmdline, as fast as it can."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> CommandLineSpy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                self.reads += 1
                if SECRET in line:
                    self.seen.append(line[:300])


async def test_env_secrets_stay_out_of_command_lines_and_the_run_directory_is_private(
        sshd: SshServer, tmp_path: Path, stub_tf: Path) -> None:
    host = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work",
                     env={"AWS_SECRET_ACCESS_KEY": SECRET, "T_SPACES": " a  b ",
                          "PYTHONPATH": str(stub_tf)})  # a TensorFlow that imports at once, for the probe
    hosts_yaml = program_folder(tmp_path, "plain.py", yaml.safe_dump({
        "hosts": {"far": {**sshd.yaml_entry(host), "kind": "ssh"}},
        # (the program prints a digest: the secret itself must not be in its command line)
        # (print writes each part, unbuffered, and the task exits at once: its line must still
        # arrive whole, tests/launch/test_last_words.py)
        "program": {"command": "python -c \"import os, hashlib; print('secret arrived', hashlib.sha256("
                               "os.environ['AWS_SECRET_ACCESS_KEY'].encode()).hexdigest(), "
                               "repr(os.environ['T_SPACES']))\"",
                    "shim": False},
        "cluster": {"ps": ["far:auto"], "worker": ["far:auto"]},
        "training": {"steps": 4},
    }))
    config = load_config(hosts_yaml)
    router = Router.for_config(config)
    supervisor = Supervisor(config, runs_root=config.run_dir, launcher=router)
    with CommandLineSpy() as spy:
        try:
            run = await asyncio.wait_for(run_program(config, config.run_dir, supervisor), 150)
        finally:
            await supervisor.close()
    assert run.code is ExitCode.OK, run.out[-3000:]
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert f"secret arrived {digest} ' a  b '" in run.out  # it reached the tasks' environment
    assert spy.reads > 100
    assert not spy.seen, spy.seen

    (run_dir,) = config.run_dir.iterdir()
    for path in [config.run_dir, run_dir, *run_dir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {mode:o}"
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)
