"""TF2 programs written as users write them, under the headless controller with real
TensorFlow: Keras 2's ``model.fit`` under ParameterServerStrategy (``tf_keras``) with
``steps_per_execution: 10`` and a SidecarEvaluator task, and a custom loop with an embedding
sharded over 2 ps. The controller's steps are the program's batches (its own count), the
coordinator's rate is the cluster's and split among the workers that ran its functions, the
training accuracy is the program's and never shown as held-out, and shards are named by
their variable. Keras 3's ``fit`` with validation data: its epochs' figures are training's, its
validation figures never a held-out evaluation of the training's loss."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shutil
from pathlib import Path
from textwrap import dedent

import pytest

from tests.program.helpers import DATA, Finished, processes_of_runs, program_folder, run_program
from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.common.terminal import without_sequences
from tui.config.load import load_config
from tui.core.events import Notice, ProgressUpdate, RunFinished, TrainerEvent

# Looked up, not imported: importing tf_keras imports TensorFlow, and every collection of the
# suite (each worker's, the quick subset's too) paid for it (~25 s of CPU cold, ~3 s cached).
if importlib.util.find_spec("tf_keras") is None:
    pytest.skip("tf_keras is not installed", allow_module_level=True)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

PSS = ("{ps: [localhost:auto, localhost:auto], chief: [localhost:auto], "
       "worker: [localhost:auto, localhost:auto]")
KERAS = f"""\
    program:
      command: python keras_fit.py --dir {{run_dir}}/ckpt --epochs 2 --steps-per-epoch 30 --spe 10
      batch_size: 64
    cluster: {PSS}, evaluator: [localhost:auto]}}
    """
LOOP = f"""\
    program:
      command: python custom_loop.py --steps {{steps}} --batch-size 128 --vocabulary 50000 --log-every 20
      batch_size: 128
      metrics: ['step (?P<step>\\d+) loss (?P<loss>[0-9.]+) accuracy (?P<accuracy>[0-9.]+)']
    cluster: {PSS}}}
    training: {{steps: 60}}
    """
TRUTH = re.compile(r"truth: \D+ (?P<steps>\d+) examples/s [\d.]+ accuracy (?P<accuracy>[\d.]+)")


def folder(tmp_path: Path, script: str, hosts_yaml: str) -> Path:
    where = tmp_path / script.removesuffix(".py")
    where.mkdir()
    shutil.copy(DATA / "truth" / script, where / script)
    (where / "hosts.yaml").write_text(dedent(hosts_yaml))
    return where / "hosts.yaml"


async def test_keras_fit_and_a_custom_loop_show_their_own_truth(tmp_path: Path) -> None:
    keras, loop = await asyncio.gather(
        run_program(load_config(folder(tmp_path, "keras_fit.py", KERAS)), tmp_path / "runs-keras"),
        run_program(load_config(folder(tmp_path, "custom_loop.py", LOOP)), tmp_path / "runs-loop"))
    for run, batches in ((keras, 60), (loop, 60)):
        check(run, batches)
    # model.fit: 2 epochs of 30 batches, 10 a function: 60 steps, not the 6 functions.
    keras_steps = [e.event for e in keras.events if isinstance(e, TrainerEvent) and e.task == "chief0"
                   and isinstance(e.event, protocol.Step)]
    assert any(s.global_step > 10 and s.global_step % 10 == 0 for s in keras_steps)
    notices = [e.text for e in keras.events if isinstance(e, Notice)]
    assert any(text.startswith("all 6 tasks up") for text in notices)  # the evaluator did not hold it
    # The embedding's parts are named by their variable, one on each ps.
    (placement,) = [e.event for e in loop.events if isinstance(e, TrainerEvent)
                    and isinstance(e.event, protocol.Placement)][:1]
    embedding = [v for v in placement.variables if v.variable == "embeddings"]
    assert {v.ps for v in embedding} == {0, 1} and {v.num_shards for v in embedding} == {2}
    assert not [v for v in placement.variables if v.variable == "ShardedVariable"]
    for tmp in ("runs-keras", "runs-loop"):
        assert not processes_of_runs(tmp_path / tmp)


def check(run: Finished, batches: int) -> None:
    assert run.code is ExitCode.OK, run.out[-5000:]
    truth = TRUTH.search(run.out)
    assert truth, run.out[-3000:]
    (summary,) = [e.summary for e in run.events if isinstance(e, RunFinished)]
    assert summary.global_step == int(truth["steps"]) == batches
    # The program's own training accuracy, as training accuracy; nothing held-out from it.
    assert summary.final_train_accuracy == pytest.approx(float(truth["accuracy"]), abs=1e-4)
    chief = [e.progress for e in run.events if isinstance(e, ProgressUpdate)]
    assert [p.global_step for p in chief] == sorted(p.global_step for p in chief)  # monotone
    split = [p for p in chief if any(w.via == "chief0" for w in p.workers)]
    assert split, "no worker was credited with the coordinator's functions"
    last = split[-1]
    parts = sum(w.examples_per_sec for w in last.workers if w.via == "chief0")
    assert last.examples_per_sec == pytest.approx(parts, rel=1e-6) and parts > 0
    assert "-- eval at step" not in "\n".join(line for line in run.out.splitlines()
                                               if line.startswith("chief0"))


async def test_keras_3_fit_with_validation_data_shows_the_training_figures_as_training(
        tmp_path: Path) -> None:
    """Keras 3 draws each epoch's last batch twice, the second time with ``val_`` figures:
    the summary's final loss and training accuracy are the last epoch's, and no held-out
    figure is made of them."""
    path = program_folder(tmp_path, "keras3_validation.py", """\
        program:
          command: python keras3_validation.py
          batch_size: 256
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        """)
    run = await run_program(load_config(path), tmp_path / "runs")
    assert run.code is ExitCode.OK, run.out[-5000:]
    (summary,) = [e.summary for e in run.events if isinstance(e, RunFinished)]
    (run_dir,) = (tmp_path / "runs").iterdir()
    ends = re.findall(r"20/20 .*- accuracy: ([\d.]+) - loss: ([\d.]+) - val_accuracy",
                      without_sequences((run_dir / "logs" / "worker0.log").read_text()))
    assert len(ends) == 3, ends  # the program's own truth: each epoch's end
    accuracy, loss = ends[-1]
    assert (summary.final_loss, summary.final_train_accuracy) == (float(loss), float(accuracy))
    assert (summary.final_eval_loss, summary.final_accuracy) == (None, None)
    assert summary.global_step == 60
    assert not [e for e in run.events if isinstance(e, TrainerEvent) and isinstance(e.event, protocol.Eval)]
    assert not processes_of_runs(tmp_path / "runs")
