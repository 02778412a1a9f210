"""A real one-node Slurm for tests: ``munged``, ``slurmctld`` and ``slurmd`` in the foreground,
all state in one temporary folder, no systemd, no root-only paths.

The node is ``localhost`` with 8 CPUs whatever the machine has (``SlurmdParameters=
config_overrides``), so a 2-core test machine still takes a ps and several workers as job steps.
Clients find it through ``SLURM_CONF`` (:attr:`SlurmCluster.env`). Usable from a pytest fixture
(:func:`running_slurm`) and from a script (``python -m tests.support.slurm DIR`` starts one and
waits for Ctrl-C), which is how the Slurm behaviours in docs/slurm.md were established.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: What a test Slurm needs; each missing one is named in the skip reason.
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "salloc", "srun", "sbatch", "squeue",
            "scontrol", "scancel", "sinfo")
PARTITION = "debug"
#: A second partition that is down: jobs submitted there pend (reason PartitionDown).
HELD_PARTITION = "held"
NODE = "localhost"
CPUS = 8
START_TIMEOUT = 60.0


def missing_binaries() -> list[str]:
    """The Slurm and MUNGE programs this machine lacks (searched in PATH and /usr/sbin)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [name for name in BINARIES if shutil.which(name, path=path) is None]


def _which(name: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    if found is None:
        raise FileNotFoundError(name)
    return found


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class SlurmCluster:
    """A running test Slurm: its folder, its config and the environment its clients need."""

    directory: Path
    conf: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def run(self, *argv: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout, check=check)

    def jobs(self) -> list[str]:
        """``squeue``'s lines (``JOBID STATE NAME``) for every job this cluster knows."""
        out = self.run("squeue", "-h", "-o", "%i %T %j").stdout
        return [line for line in out.splitlines() if line.strip()]

    def logs(self) -> str:
        """The tail of each daemon's log, for a failure message."""
        parts = []
        for name in ("munged", "slurmctld", "slurmd"):
            path = self.directory / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)


def _write_config(directory: Path, ctld_port: int, slurmd_port: int) -> Path:
    for sub in ("state", "spool"):
        (directory / sub).mkdir(mode=0o755, exist_ok=True)
    user = _user()
    lines = [
        "ClusterName=tfdisttest",
        f"SlurmctldHost={NODE}",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"SlurmUser={user}",
        f"SlurmdUser={user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={directory / 'munge.socket'}",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd.pid'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'slurmd.log'}",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "ReturnToService=2",
        # Steps and jobs end promptly: SIGKILL 2 s after SIGTERM, no grace for a dead srun.
        "KillWait=2",
        "MessageTimeout=10",
        "InactiveLimit=0",
        "MinJobAge=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        f"NodeName={NODE} CPUs={CPUS} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName={HELD_PARTITION} Nodes={NODE} MaxTime=INFINITE State=DOWN",
    ]
    conf = directory / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _spawn(name: str, argv: list[str], directory: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = (directory / f"{name}.out").open("ab")
    with log:
        # Own process group: the test's Ctrl-C must not reach the daemons before teardown.
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env={**os.environ, **env}, start_new_session=True)


def _wait_for(what: str, check: object, cluster: SlurmCluster, deadline: float) -> None:
    """Poll ``check`` (a callable returning bool) until it holds. The daemons announce
    nothing we could wait on, so this asks them (each question is itself a round trip)."""
    assert callable(check)
    while not check():
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode} while waiting for "
                                   f"{what}\n{cluster.logs()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"test Slurm: timed out waiting for {what}\n{cluster.logs()}")
        time.sleep(0.1)


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        result = cluster.run("sinfo", "-h", "-N", "-p", PARTITION, "-o", "%t", check=False, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0 and result.stdout.strip().rstrip("*") == "idle"


@contextlib.contextmanager
def running_slurm(directory: Path, timeout: float = START_TIMEOUT) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd with state in ``directory``; yield when the node is
    idle; stop them (by pid) on exit. Raises RuntimeError with the daemons' logs if they fail."""
    directory.mkdir(parents=True, exist_ok=True)
    # munged refuses a key or socket folder that others can write to; the temp folder is ours.
    directory.chmod(0o755)
    ctld_port, slurmd_port = _free_ports(2)
    conf = _write_config(directory, ctld_port, slurmd_port)
    key = directory / "munge.key"
    subprocess.run([_which("mungekey"), "-c", "-f", "-k", str(key)], check=True, capture_output=True)
    key.chmod(0o400)
    env = {"SLURM_CONF": str(conf)}
    cluster = SlurmCluster(directory=directory, conf=conf, env=env)
    try:
        # --force: munged refuses to run as root, which CI is; the folder checks stay on.
        cluster.processes["munged"] = _spawn("munged", [
            _which("munged"), "-F", "--force", f"--socket={directory / 'munge.socket'}",
            f"--key-file={key}", f"--pid-file={directory / 'munged.pid'}",
            f"--log-file={directory / 'munged.log'}", f"--seed-file={directory / 'munged.seed'}"],
            directory, env)
        deadline = time.monotonic() + timeout
        _wait_for("munged's socket", lambda: (directory / "munge.socket").exists(), cluster, deadline)
        cluster.processes["slurmctld"] = _spawn("slurmctld", [
            _which("slurmctld"), "-D", "-i", "-f", str(conf)], directory, env)
        cluster.processes["slurmd"] = _spawn("slurmd", [
            _which("slurmd"), "-D", "-N", NODE, "-f", str(conf)], directory, env)
        _wait_for("the node to be idle", lambda: _node_idle(cluster), cluster, deadline)
        yield cluster
    finally:
        _stop(cluster)


def _stop(cluster: SlurmCluster) -> None:
    """Stop the daemons (slurmd first, munged last) by their own process groups."""
    for name in ("slurmd", "slurmctld", "munged"):
        process = cluster.processes.get(name)
        if process is None or process.poll() is not None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main() -> None:
    """Start a test Slurm in the folder given and keep it up until Ctrl-C (for experiments)."""
    directory = Path(sys.argv[1]).absolute()
    with running_slurm(directory) as cluster:
        # Blocked only now: the daemons must not inherit a mask that ignores our SIGTERM.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        print(f"export SLURM_CONF={cluster.conf}", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    main()
