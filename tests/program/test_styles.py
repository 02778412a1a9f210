"""Users' programs in four common styles, none written for tfdist-tui, each run unchanged
under the headless controller with real TensorFlow (issue 22):

- a Cloud ML Engine package run as a module (``python -m trainer.task``; its package is
  called ``trainer``, like ours): examples/cmle_package;
- a hyphen-flag ``Supervisor`` program printing its own progress lines;
- a TF2 ``ParameterServerStrategy`` + ``ClusterCoordinator`` custom loop with a chief:
  examples/tf2_coordinator;
- ``SyncReplicasOptimizer`` over two ps with a partitioned variable.

Each ends cleanly with its placement, steps and a rate shown, the run's real final step in
the summary, every ps (and TF2's serving workers) exiting 0 by itself, and no hint. All four
run at once: their starts mostly wait on TensorFlow imports."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest

from tests.program.helpers import DATA, REPO, Finished, processes_of_runs, run_program
from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.config.load import load_config
from tui.core.events import (
    ProgressUpdate,
    RunFinished,
    RunStarted,
    TaskHint,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.task_state import TaskState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


@dataclass(frozen=True)
class Style:
    """One program: where its files come from, its hosts.yaml, the steps it trains to."""

    name: str
    files: Path
    hosts_yaml: str
    steps: int
    #: Tasks that serve and must exit 0 by themselves once told (``end`` on stdin).
    serving: tuple[str, ...]


STYLES = (
    Style("cmle_module", REPO / "examples" / "cmle_package", """\
        program:
          command: python -m trainer.task --job-dir {checkpoint_dir} --train-steps {steps}
        cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}
        training: {steps: 300}
        """, 300, ("ps0",)),
    Style("hyphen_supervisor", DATA / "styles" / "hyphen_supervisor.py", """\
        program:
          command: >-
            python hyphen_supervisor.py --ps-hosts {ps_hosts} --worker-hosts {worker_hosts}
            --job-name {job} --task-index {index} --max-steps {steps}
        cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}
        training: {steps: 300}
        """, 300, ("ps0",)),
    Style("tf2_coordinator", REPO / "examples" / "tf2_coordinator", """\
        program:
          command: python train.py --steps {steps} --batch {batch} --report 100
        cluster: {ps: [localhost:auto, localhost:auto], chief: [localhost:auto], worker: [localhost:auto]}
        training: {steps: 600, batch: 32}
        """, 600, ("ps0", "ps1", "worker0")),
    Style("sync_partitioned", DATA / "styles" / "sync_partitioned.py", """\
        program:
          command: python sync_partitioned.py {steps}
        cluster: {ps: [localhost:auto, localhost:auto], worker: [localhost:auto, localhost:auto]}
        training: {steps: 150}
        """, 150, ("ps0", "ps1")),
)


def folder_of(style: Style, tmp_path: Path) -> Path:
    folder = tmp_path / style.name
    if style.files.is_dir():
        shutil.copytree(style.files, folder, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    else:
        folder.mkdir()
        shutil.copy(style.files, folder)
    (folder / "hosts.yaml").write_text(dedent(style.hosts_yaml))
    return folder


async def test_four_styles_of_users_programs_run_unchanged_to_a_clean_end(tmp_path: Path) -> None:
    async def run(style: Style) -> Finished:
        config = load_config(folder_of(style, tmp_path) / "hosts.yaml")
        return await run_program(config, tmp_path / f"runs-{style.name}")

    finished = await asyncio.gather(*(run(style) for style in STYLES))
    for style, result in zip(STYLES, finished, strict=True):
        check(style, result)
        assert not processes_of_runs(tmp_path / f"runs-{style.name}")


def check(style: Style, run: Finished) -> None:
    where = f"{style.name}:\n{run.out[-5000:]}"
    assert run.code is ExitCode.OK, where
    (started,) = [e for e in run.events if isinstance(e, RunStarted)]
    assert started.description.startswith("running python "), where  # not "training mlp on digits"
    (summary,) = [e.summary for e in run.events if isinstance(e, RunFinished)]
    assert all(t.state is TaskState.SUCCEEDED for t in summary.tasks), summary.tasks
    for task in (t for t in summary.tasks if t.name in style.serving):
        assert (task.exit_code, task.reason) == (0, ""), (style.name, task)
    inner = [e.event for e in run.events if isinstance(e, TrainerEvent)]
    placements = [e for e in inner if isinstance(e, protocol.Placement)]
    assert placements and placements[0].variables, where
    if style.name == "tf2_coordinator":  # ShardedVariable parts, one on each ps
        assert {v.ps for v in placements[0].variables} == {0, 1}
        assert max(v.num_shards for v in placements[0].variables) == 2
    if style.name == "sync_partitioned":
        assert placements[0].partitions == 2
        assert any("ConditionalAccumulator" in text for text in placements[0].unattributed)
    steps = [e.global_step for e in inner if isinstance(e, protocol.Step)]
    assert steps, where
    # The real final step: what the tasks last reported, at or past the target.
    assert summary.global_step == max([*steps, *(e.global_step for e in inner
                                                   if isinstance(e, protocol.Done))])
    assert summary.global_step >= style.steps and summary.target == style.steps
    rates = [e.progress.steps_per_sec for e in run.events if isinstance(e, ProgressUpdate)]
    assert any(rate for rate in rates), f"no rate shown: {where}"
    assert "0.0 ex/s" not in run.out
    assert not [e for e in run.events if isinstance(e, TaskHint)], where
    last_exit = max(e.t for e in run.events if isinstance(e, TaskStateChanged) and e.new.is_finished)
    last_step = min(e.t for e in run.events if isinstance(e, TrainerEvent)
                    and isinstance(e.event, protocol.Step | protocol.Done)
                    and e.event.global_step >= summary.global_step)
    print(f"{style.name}: last step -> last exit {last_exit - last_step:.1f} s")
    for line in run.out.splitlines():
        if "measured" in line or "max/mean traffic" in line:
            print(f"{style.name}: {line.strip()}")
    assert last_exit - last_step < 10.0, where
