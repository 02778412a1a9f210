"""A Slurm allocation held for the controller's lifetime, and nothing longer.

The allocation is ``salloc <options> sh -c '<print job id and nodes>; exec cat >/dev/null'``:
salloc runs that *holder* on this machine once the job is granted and relinquishes the job
the moment the holder exits. The holder's stdin is a pipe from the controller, so it exits
when the controller closes it (the end of a run, Ctrl-C, ``q``) and also when the controller
dies, SIGKILL included: the kernel closes the pipe. Then slurmctld ends every step still
running in the job. While the request still pends there is no holder yet: a small watchdog
(``sh``, its stdin another pipe from the controller) SIGTERMs salloc when that pipe closes,
which withdraws the request; the holder ends the watchdog once the job is granted.
(``salloc --no-shell`` would leave the job to its time limit.)

While the job pends, its reason comes from ``squeue -h -j J -o %T/%r`` and is reported; past
the entry's ``pending_timeout`` the job is cancelled and the host refused. When the controller
itself runs inside an allocation (``SLURM_JOB_ID`` set), that one is used and never released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui.config.cluster import HostSpec
from tui.launch.base import LaunchError

log = logging.getLogger(__name__)

HOLDER_MARK = "tfdist-allocation"
WATCHDOG_ENV = "TFDIST_SALLOC_WATCHDOG"
# Granted: end the watchdog's process group (from now on the holder's own stdin ties the job
# to the controller), say which job and nodes, wait for EOF.
_HOLDER = (f'kill -TERM "-${WATCHDOG_ENV}" 2>/dev/null; '
           f'echo "{HOLDER_MARK} $SLURM_JOB_ID $SLURM_JOB_NODELIST"; exec cat >/dev/null')
# Reads salloc's pid, then waits for EOF: the controller gone (or releasing) while the request
# still pends, so salloc is told to withdraw it. (SIGTERM to a *granted* salloc whose holder
# is ending too makes Slurm 22.05's salloc spin forever; hence a watchdog the grant ends,
# not a parent-death signal.)
_WATCHDOG = ('read pid; cat >/dev/null; '
             'grep -qs salloc "/proc/$pid/comm" && kill -TERM "$pid"')
#: Seconds between questions to squeue while a job pends (its reason can change).
PENDING_POLL = 2.0
#: How long salloc may take to relinquish the job after its holder ended.
RELEASE_TIMEOUT = 15.0
COMMAND_TIMEOUT = 30.0
#: Pending reasons that no wait resolves, and the setting that asks too much. (Others, such
#: as PartitionDown or a QOS limit, can change while the job waits.)
_HOPELESS = {"PartitionNodeLimit": "nodes", "PartitionTimeLimit": "time"}
_PENDING = re.compile(r"(?:Pending job allocation|job) (\d+)")
_GRANTED = re.compile(r"Granted job allocation (\d+)")


class SlurmError(LaunchError):
    """Slurm refused or failed a request for a hosts entry. ``str()`` names the entry and,
    when it came from hosts.yaml, where: ``host hpc (hosts.yaml:3:8): <what Slurm said>``."""

    def __init__(self, host: HostSpec, detail: str, key: str | None = None) -> None:
        settings = host.slurm
        where = (settings.places.get(key or "") or settings.origin) if settings is not None else ""
        where = where or "kind: slurm"
        self.host = host.name
        self.detail = detail
        super().__init__(f"host {host.name} ({where}): {detail}")


@dataclass(frozen=True)
class Node:
    """One node of an allocation: its Slurm name and the address other tasks reach it at."""

    name: str
    address: str


async def run_slurm(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT) -> tuple[int, str, str]:
    """Run a Slurm client command: (exit status, stdout, stderr). A missing command is exit 127."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: command not found (is Slurm's client installed?)"
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return 124, "", f"{argv[0]} did not answer within {timeout:g} s"
    return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def slurm_message(stderr: str) -> str:
    """Slurm's own words from a client's stderr: its error lines, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    text = "; ".join(dict.fromkeys(errors)) if errors else (lines[-1] if lines else "no message")
    return text.replace("salloc: ", "")


async def pending_reason(job_id: str) -> str:
    """``STATE/REASON`` of a job (``PENDING/Resources``), or '' when squeue cannot tell."""
    status, out, _ = await run_slurm(["squeue", "-h", "-j", job_id, "-o", "%T/%r"])
    return out.strip() if status == 0 else ""


async def nodes_of(host: HostSpec, nodelist: str) -> tuple[Node, ...]:
    """The nodes of a Slurm nodelist (``node[1-3]``), each with its NodeAddr."""
    status, out, err = await run_slurm(["scontrol", "show", "hostnames", nodelist])
    names = out.split()
    if status != 0 or not names:
        raise SlurmError(host, f"cannot read the nodes of {nodelist!r}: {slurm_message(err)}")
    status, out, _ = await run_slurm(["scontrol", "show", "node", "-o", ",".join(names)])
    addresses = dict(re.findall(r"NodeName=(\S+).*?NodeAddr=(\S+)", out)) if status == 0 else {}
    return tuple(Node(name, addresses.get(name, name)) for name in names)


class Allocation:
    """A granted job: :meth:`request` one, :meth:`release` it (idempotent)."""

    def __init__(self, host: HostSpec, job_id: str, nodes: tuple[Node, ...],
                 process: asyncio.subprocess.Process | None,
                 watchdog: asyncio.subprocess.Process | None = None) -> None:
        self.host = host
        self.job_id = job_id
        self.nodes = nodes
        self._process = process  # None: the controller's own allocation, not ours to end
        self._watchdog = watchdog
        self._released = False
        #: Seconds the request waited for its grant.
        self.waited = 0.0

    @property
    def owned(self) -> bool:
        """The controller asked for this job (and so releases it)."""
        return self._process is not None

    @classmethod
    async def request(cls, host: HostSpec, job_name: str,
                      notify: Callable[[str], None] | None = None) -> Allocation:
        """Ask for ``host``'s allocation and wait (up to its ``pending_timeout``) until it is
        granted. Raises :class:`SlurmError` with Slurm's reason when it is refused."""
        settings = host.slurm
        assert settings is not None, "a kind: slurm entry has Slurm settings"
        inherited = os.environ.get("SLURM_JOB_ID")
        if inherited and os.environ.get("SLURM_JOB_NODELIST"):
            return cls(host, inherited, await nodes_of(host, os.environ["SLURM_JOB_NODELIST"]), None)
        argv = ["salloc", f"--job-name={job_name}", *settings.salloc_options(), "sh", "-c", _HOLDER]
        watchdog = await asyncio.create_subprocess_exec(
            "sh", "-c", _WATCHDOG, stdin=asyncio.subprocess.PIPE, start_new_session=True)
        log.info("host %s: %s", host.name, " ".join(argv))
        # Our SLURM_* variables (a controller started in a job step) must not steer salloc.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
        env[WATCHDOG_ENV] = str(watchdog.pid)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env,
                # Its own session: a Ctrl-C in the terminal reaches the controller only, which
                # then stops the tasks in order before releasing the job.
                start_new_session=True)
        except FileNotFoundError:
            _end_watchdog(watchdog)
            raise SlurmError(host, "salloc not found: Slurm's client commands are not installed "
                                   "on this machine") from None
        assert watchdog.stdin is not None
        watchdog.stdin.write(f"{process.pid}\n".encode())
        allocation = cls(host, "", (), process, watchdog)
        try:
            await allocation._wait_granted(notify)
        except BaseException:
            await allocation.release()
            raise
        return allocation

    async def _wait_granted(self, notify: Callable[[str], None] | None) -> None:
        process = self._process
        assert process is not None and process.stdout is not None and process.stderr is not None
        settings = self.host.slurm
        assert settings is not None
        stderr: list[str] = []
        reader = asyncio.ensure_future(process.stdout.readline())
        errors = asyncio.ensure_future(_collect(process.stderr, stderr))
        loop = asyncio.get_running_loop()
        started = loop.time()
        reported = ""
        try:
            while True:
                await asyncio.wait({reader}, timeout=PENDING_POLL)
                if reader.done():
                    break
                self.waited = loop.time() - started
                job = _job_id(stderr)
                reason = await pending_reason(job) if job else ""
                if reason and reason != reported:
                    reported = reason
                    text = (f"host {self.host.name}: Slurm job {job} is waiting for its allocation "
                            f"({reason}); giving up after {settings.pending_timeout:g} s")
                    log.info(text)
                    if notify is not None:
                        notify(text)
                if job:
                    self.job_id = job
                hopeless = _HOPELESS.get(reason.partition("/")[2])
                if hopeless is not None:
                    raise SlurmError(self.host, f"Slurm job {job} can never start here ({reason}: the "
                                     f"partition's limit is below what {hopeless}: asks); cancelled",
                                     hopeless)
                if self.waited > settings.pending_timeout:
                    raise SlurmError(self.host, f"Slurm job {job or '?'} still pending after "
                                     f"{settings.pending_timeout:g} s ({reported or 'no reason given'}); "
                                     "cancelled. Raise pending_timeout: or ask for less")
            line = reader.result().decode(errors="replace").split()
            if len(line) != 3 or line[0] != HOLDER_MARK:
                await asyncio.wait_for(process.wait(), COMMAND_TIMEOUT)
                await errors
                granted = _GRANTED.search("".join(stderr))
                if granted:
                    # Granted, but the holder never ran (an option of extra: that changes
                    # what salloc runs): not a refusal, and the job must not outlive us.
                    self.job_id = granted.group(1)
                    raise SlurmError(self.host, f"Slurm granted job {self.job_id}, but salloc "
                                     f"exited ({process.returncode}) without running the "
                                     "controller's holder in it (does an option of extra: change "
                                     "what salloc runs?); the job is cancelled", "extra")
                message = slurm_message("".join(stderr))
                raise SlurmError(self.host, f"Slurm refused the allocation: {message}", _blamed(message))
            self.job_id = line[1]
            self.nodes = await nodes_of(self.host, line[2])
        finally:
            reader.cancel()
            if not errors.done():
                errors.cancel()  # salloc's later lines ("Relinquishing ...") are not needed
            self.waited = loop.time() - started

    async def release(self) -> None:
        """End the job: the holder's stdin closes and salloc relinquishes the job, which ends
        its steps. A job still pending is cancelled (salloc waits for the grant, not for its
        stdin); a salloc that does not exit in time is killed and its job cancelled."""
        process = self._process
        if process is None or self._released:
            return
        self._released = True
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        if self._watchdog is not None:
            _end_watchdog(self._watchdog)  # pending: it tells salloc to withdraw; granted: gone
        if not self.nodes:
            if self.job_id:
                await run_slurm(["scancel", self.job_id])
            with contextlib.suppress(ProcessLookupError):
                process.terminate()  # salloc withdraws a request it is still waiting on
        try:
            await asyncio.wait_for(process.wait(), RELEASE_TIMEOUT)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            if self.job_id:
                await run_slurm(["scancel", self.job_id])


def _end_watchdog(watchdog: asyncio.subprocess.Process) -> None:
    """Close the watchdog's stdin: it ends (signalling salloc only if that still pends)."""
    if watchdog.stdin is not None and not watchdog.stdin.is_closing():
        watchdog.stdin.close()


def _blamed(message: str) -> str | None:
    """The setting a refusal is about, by Slurm's words for it."""
    lowered = message.lower()
    words = {"partition": "partition", "account": "account", "time limit": "time", "node": "nodes"}
    return next((key for word, key in words.items() if word in lowered), None)


def _job_id(stderr: Sequence[str]) -> str:
    for line in stderr:
        match = _PENDING.search(line) or _GRANTED.search(line)
        if match:
            return match.group(1)
    return ""


async def _collect(stream: asyncio.StreamReader, lines: list[str]) -> None:
    while line := await stream.readline():
        lines.append(line.decode(errors="replace"))
