"""Preview the placement a relaunch would use. The built-in trainer's placement is computed
from the model's shapes and the partitioner's rule (:mod:`trainer.layout`, checked against
TensorFlow's own in tests/trainer/test_layout.py): no TensorFlow import, so the preview
shows as the key is pressed. Part of the core: no Textual here."""

from __future__ import annotations

from trainer import layout, protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig


class PreviewError(Exception):
    """The plan could not be computed; the message says why in one line."""


def preview_placement(config: ClusterConfig, settings: TrainingSettings) -> protocol.Placement:
    """The placement of ``settings`` on ``config``'s cluster. Only the built-in trainer's
    graph is known before it runs: a user's program shows its placement once its chief
    has built its graph."""
    if config.program is not None:
        raise PreviewError("no preview for your own program: its placement shows once it runs")
    problems = settings.problems(len(config.worker_tasks))
    if problems:
        name, message = problems[0]
        raise PreviewError(f"{name} {message}")
    return layout.plan(settings, len(config.ps_tasks))
