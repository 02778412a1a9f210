"""Shared by the tests of users' programs: a program folder, a headless run, what is left."""

from __future__ import annotations

import io
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import psutil

from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.core.events import ControllerEvent
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.headless import run_headless
from tui.launch.owner import RUN_ID_ENV

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]


def program_folder(tmp_path: Path, script: str, hosts_yaml: str) -> Path:
    """``tmp_path/program`` with ``data/<script>`` and ``hosts_yaml``; returns the yaml's path."""
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(DATA / script, folder / script)
    path = folder / "hosts.yaml"
    path.write_text(dedent(hosts_yaml))
    return path


@dataclass
class Finished:
    code: ExitCode
    out: str
    events: list[ControllerEvent]


async def run_program(config: ClusterConfig, runs_root: Path, supervisor: Supervisor | None = None,
                      ) -> Finished:
    """One headless run of ``config`` in-process, with every controller event kept."""
    supervisor = supervisor or Supervisor(config, runs_root=runs_root)
    events: list[ControllerEvent] = []
    supervisor.subscribe(events.append)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless(RunOptions(config=config, runs_root=runs_root), supervisor=supervisor,
                              out=out, err=err, handle_signals=False)
    return Finished(code, out.getvalue() + err.getvalue(), events)


def processes_of_runs(runs_root: Path, within: float = 5.0) -> list[str]:
    """Command lines of processes still alive with a run id of ``runs_root`` in their
    environment, after waiting up to ``within`` s for them to go."""
    ids = {p.name for p in runs_root.iterdir() if p.is_dir()} if runs_root.exists() else set()
    assert ids, f"no run under {runs_root}"
    deadline = time.monotonic() + within
    while True:
        alive = []
        for process in psutil.process_iter(["cmdline", "status"]):
            try:
                if process.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if process.environ().get(RUN_ID_ENV) in ids:
                    alive.append(" ".join(process.info["cmdline"] or []))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def load(path: Path) -> ClusterConfig:
    return load_config(path)
