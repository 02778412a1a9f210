"""Preview the placement a relaunch would use, by running ``python -m trainer plan`` (which
builds the graph without starting any server). Part of the core: no Textual here."""

from __future__ import annotations

import asyncio
import os
import sys

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig
from tui.launch.package import trainer_root
from tui.program.trainer import TRAINER_ARGV

PREVIEW_TIMEOUT = 120.0


class PreviewError(Exception):
    """The plan could not be computed; the message says why in one line."""


async def preview_placement(config: ClusterConfig, settings: TrainingSettings, *,
                            python: str = sys.executable,
                            timeout: float = PREVIEW_TIMEOUT) -> protocol.Placement:
    """The placement of ``settings`` on ``config``'s cluster. Runs locally: it needs
    TensorFlow on this machine, not on the cluster's hosts. Only the built-in trainer's
    graph can be built without running it: a user's program shows its placement once its
    chief has built its graph."""
    if config.program is not None:
        raise PreviewError("no preview for your own program: its placement shows once it runs")
    problems = settings.problems(len(config.worker_tasks))
    if problems:
        name, message = problems[0]
        raise PreviewError(f"{name} {message}")
    argv = [python, *TRAINER_ARGV, "plan", "--num-ps", str(len(config.ps_tasks)),
            "--num-workers", str(len(config.worker_tasks)), *settings.to_argv()]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(trainer_root()), env.get("PYTHONPATH")) if p)
    env.pop("TF_CONFIG", None)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            # ``-m`` imports from the working folder first: ours, not the user's.
            stderr=asyncio.subprocess.PIPE, start_new_session=True, cwd=str(trainer_root()))
    except OSError as exc:
        raise PreviewError(f"cannot run {python}: {exc.strerror or exc}") from None
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        raise PreviewError(f"plan took longer than {timeout:.0f} s") from None
    finally:
        # Cancelled (a newer preview replaced this one) or timed out: leave nothing behind.
        if process.returncode is None:
            process.kill()
            await process.wait()
    for line in stdout.decode("utf-8", "replace").splitlines():
        event = protocol.parse_event(line)
        if isinstance(event, protocol.Placement):
            return event
        if isinstance(event, protocol.Error):
            raise PreviewError(event.message)
    last = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [
        f"plan exited with code {process.returncode}"]
    raise PreviewError(last[0])
