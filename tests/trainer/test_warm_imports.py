"""A warm task sees what a cold one sees where it looks at how TensorFlow was imported: a
program under ``TF_USE_LEGACY_KERAS=1`` (as Kubeflow's dist-mnist image runs it) gets Keras 2
through ``tf.keras`` and ``from tensorflow.keras import ...`` alike, forked from a pool that
imported TensorFlow with that value; a program that sets the variable itself starts cold and
says why once. Real pools through the local launcher, compared with the same program run by
hand (``python script.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trainer.warm import COLD_NOTICE
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.lines import Stream
from tui.launch.local.launcher import LocalLauncher, LocalTask
from tui.launch.local.warm import WarmTask
from tui.launch.streams import each_line

REPO = Path(__file__).resolve().parents[2]
LOCAL = HostSpec(name="localhost", address="localhost")
TASK = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)

#: What a program can observe of its start: which Keras each way of reaching it gives, what
#: its environment said at import, its argv, ``__main__``, its path's first entry.
PROBE = """
import json, os, sys
{prelude}
import tensorflow as tf
from tensorflow.keras import layers
import tensorflow.keras.datasets
print(json.dumps({{
    "report": True,
    "model": tf.keras.Model.__module__,
    "dense": layers.Dense.__module__,
    "datasets": tensorflow.keras.datasets.mnist.load_data.__module__,
    "legacy": os.environ.get("TF_USE_LEGACY_KERAS"),
    "at_import": os.environ.get("PROBE_AT_IMPORT"),
    "argv": sys.argv, "main": __name__, "path0": sys.path[0],
    "main_file": sys.modules["__main__"].__file__,
}}), flush=True)
"""


def _report(lines: list[str]) -> dict[str, object]:
    found = [json.loads(line) for line in lines if line.startswith('{"report"')]
    assert len(found) == 1, lines
    return dict(found[0])


def by_hand(script: Path, env: dict[str, str]) -> dict[str, object]:
    """The truth: the program as a user starts it, ``python script.py --flag``."""
    done = subprocess.run([sys.executable, str(script), "--flag"], env={**os.environ, **env},
                          cwd=script.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return _report(done.stdout.splitlines())


async def under_pool(launcher: LocalLauncher, script: Path,
                     env: dict[str, str]) -> tuple[LocalTask | WarmTask, dict[str, object], list[str]]:
    """The same program as the controller starts it: under the shim, forked from a pool when
    one can serve it. (the task, its report, its stderr lines)"""
    argv = [sys.executable, "-m", "trainer.shim", str(script), "--flag"]
    task = await launcher.start(TASK, LOCAL, argv, {"PYTHONPATH": str(REPO), **env}, str(script.parent))
    out: list[str] = []
    err: list[str] = []
    async for line in each_line(task.output()):
        (err if line.stream is Stream.STDERR else out).append(line.text)
    assert await task.wait() == 0, err
    return task, _report(out), err


def _comparable(report: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in report.items() if k != "argv"}


async def test_legacy_keras_from_the_environment_forks_from_a_pool_imported_with_it(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(prelude=""))
    env = {"TF_USE_LEGACY_KERAS": "1", "PROBE_AT_IMPORT": "seen"}
    truth = by_hand(script, env)
    assert all(str(truth[k]).startswith("tf_keras.") for k in ("model", "dense", "datasets")), truth
    launcher = LocalLauncher()
    try:
        plain_task, plain, _ = await under_pool(launcher, script, {"PROBE_AT_IMPORT": "seen"})
        task, report, err = await under_pool(launcher, script, env)
        # Both forked, each from a pool of its own: one imported TensorFlow without the variable.
        assert isinstance(plain_task, WarmTask) and isinstance(task, WarmTask)
        pools = launcher.warm_pools
        assert pools is not None and len(pools.pools) == 2
        assert str(plain["dense"]).startswith("keras.")  # no variable: Keras 3, as by hand
        assert _comparable(report) == _comparable(truth)  # Keras 2 everywhere, as by hand
        assert report["argv"] == [str(script), "--flag"] == truth["argv"]
        assert not any(COLD_NOTICE in line for line in err)
    finally:
        await launcher.close()


async def test_a_program_that_sets_legacy_keras_itself_starts_cold_and_says_why_once(tmp_path: Path) -> None:
    script = tmp_path / "sets_it.py"
    script.write_text(PROBE.format(prelude='os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")'))
    truth = by_hand(script, {})
    assert str(truth["dense"]).startswith("tf_keras.")
    launcher = LocalLauncher()
    try:
        task, report, err = await under_pool(launcher, script, {})
        assert isinstance(task, WarmTask)  # asked of the pool, which gave it a cold start
        assert _comparable(report) == _comparable(truth)
        notices = [line for line in err if COLD_NOTICE in line]
        assert len(notices) == 1 and "sets TF_USE_LEGACY_KERAS itself" in notices[0], err
    finally:
        await launcher.close()
