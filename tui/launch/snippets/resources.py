"""Resource probe: ``python -c SOURCE``. Reports the CPUs this user's processes may run on
(affinity), the cgroup's CPU quota in cores (None without one), and the GPUs a process would
see (``CUDA_VISIBLE_DEVICES`` when set, else ``nvidia-smi``, else the driver's /proc entries),
all without TensorFlow, which takes seconds to import and maps GPU memory when it does.

The controller imports :func:`probe` for localhost, so both sides find the same answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

RESULT_PREFIX = "tfdist-result "
#: cgroup v2 and v1 files that hold a CPU quota.
_CPU_MAX = "/sys/fs/cgroup/cpu.max"
_CFS_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
_CFS_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"
_NVIDIA_PROC = "/proc/driver/nvidia/gpus"
NVIDIA_SMI_TIMEOUT = 10.0


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except (OSError, ValueError):
        return None


def cpu_ids() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def cpu_quota() -> float | None:
    """The cgroup's CPU limit in cores (``max`` or no cgroup: None)."""
    text = _read(_CPU_MAX)
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max":
            try:
                return int(quota) / int(period or "100000")
            except ValueError:
                return None
        return None
    quota_text, period_text = _read(_CFS_QUOTA), _read(_CFS_PERIOD)
    try:
        if quota_text and period_text and int(quota_text) > 0:
            return int(quota_text) / int(period_text)
    except ValueError:
        return None
    return None


def gpu_ids(environ: dict[str, str] | None = None) -> list[str]:
    """GPU ids as ``CUDA_VISIBLE_DEVICES`` would name them: the variable's own entries when
    it is set (empty or ``-1``: none), else the indices nvidia-smi or the driver reports."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        # CUDA stops at the first invalid entry; -1 is the usual way to say "none".
        taken = []
        for entry in entries:
            if entry.startswith("-"):
                break
            taken.append(entry)
        return taken
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=NVIDIA_SMI_TIMEOUT, check=False)
        if done.returncode == 0:
            return [line.strip() for line in done.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return [str(k) for k in range(len(os.listdir(_NVIDIA_PROC)))]
    except OSError:
        return []


def probe() -> dict[str, object]:
    """What this host offers: ``cpus`` (ids), ``quota`` (cores or None), ``gpus`` (ids)."""
    return {"cpus": cpu_ids(), "quota": cpu_quota(), "gpus": gpu_ids()}


def main() -> None:
    sys.stdout.write(RESULT_PREFIX + json.dumps(probe()) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
