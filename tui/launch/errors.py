"""Per-host failures of the SSH launcher, typed so front ends and tests can tell them apart
while the message stays a sentence for people."""

from __future__ import annotations

from enum import Enum

from tui.launch.base import LaunchError


class HostFailure(Enum):
    """Why a remote host cannot be used."""

    UNREACHABLE = "unreachable"                  # refused, timed out, unknown name
    AUTH_REFUSED = "authentication refused"
    IDENTITY_UNUSABLE = "identity unusable"      # key file missing, unreadable or encrypted
    HOST_KEY_UNKNOWN = "host key unknown"
    HOST_KEY_CHANGED = "host key changed"
    PYTHON_MISSING = "python missing"
    TENSORFLOW_MISSING = "TensorFlow not importable"
    DEPLOY_FAILED = "deployment failed"
    CONNECTION_LOST = "connection lost"
    COMMAND_FAILED = "remote command failed"


class HostError(LaunchError):
    """A host cannot be used, or stopped being usable. ``str()`` reads
    ``host gpu1 (10.1.2.3:22): <cause>: <detail>``."""

    def __init__(self, host: str, where: str, failure: HostFailure, detail: str) -> None:
        self.host = host
        self.where = where
        self.failure = failure
        self.detail = detail
        super().__init__(f"host {host} ({where}): {failure.value}: {detail}")
