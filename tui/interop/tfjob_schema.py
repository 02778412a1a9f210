"""The parts of Kubeflow's TFJob format both directions use: its kind and version, replica
types, restart policies and the container conventions of the training operator."""

from __future__ import annotations

from collections.abc import Mapping

from tui.config.cluster import RestartMode

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
#: The operator reads the cluster port from the container of this name's port of this name.
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
#: TFJob's default port; every replica is its own pod, so all tasks can share it.
PORT = 2222
GPU_RESOURCE = "nvidia.com/gpu"
#: Our job names and TFJob's replica types (the operator lower-cases the latter in TF_CONFIG).
REPLICA_TYPES: Mapping[str, str] = {"ps": "PS", "worker": "Worker", "chief": "Chief",
                                    "evaluator": "Evaluator"}
#: TFJob's restart policies. Ours map to ``Never`` and ``OnFailure``: ``ExitCode`` restarts
#: only on exit codes 128 and above (killed, OOM) and gives up on 1..127, which is not what
#: our ``on-failure`` (any non-zero exit) does; ``Always`` also restarts finished tasks.
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
TO_TFJOB_RESTART: Mapping[RestartMode, str] = {RestartMode.NEVER: "Never",
                                               RestartMode.ON_FAILURE: "OnFailure"}
#: The Python inside the image; the image's own interpreter is the one with TensorFlow.
CONTAINER_PYTHON = "python"
#: Environment a task of ours gets that means nothing inside a pod (the operator sets
#: TF_CONFIG itself; the run id names controller runs).
