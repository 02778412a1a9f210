"""A lab of real hosts on this machine: each host a Linux network namespace with its own
address, its own OpenSSH server on port 22 and a link (a veth pair) to a private bridge.

Layout of one lab (``ID`` is a short random id, so two labs never share a name)::

    root namespace: bridge tfID (10.A.B.1/24)  <- the controller under test talks from here
      |- veth tfIDv0 == eth0 in namespace tfIDh0 (10.A.B.2/24, lo up, sshd on :22)
      |- veth tfIDv1 == eth0 in namespace tfIDh1 (10.A.B.3/24, ...)
      ...

The namespaces share the file system (the same Python and TensorFlow work inside them) and
nothing else of the network: each host has its own sockets, ports and counters. The
bridge-side veth of a host is its cable: :meth:`NetLab.cap` limits it with ``tc tbf``
(:meth:`NetLab.uncap` lifts that), :meth:`NetLab.cut` takes it down (TCP connections then
hang silently, as with a pulled cable) and :meth:`NetLab.restore` brings it back;
:meth:`NetLab.counters` reads its byte counters.

The /24 is reserved with a file in :data:`LOCKS` (made with O_EXCL, holding the owner's pid
and everything the lab made), so labs made at once by different test processes never share
a subnet; a file whose owner died is the record of a lab nobody tore down, and the next lab
tears that one down first. :meth:`NetLab.close` undoes exactly what was recorded, in reverse.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support.ssh import host_entry
from tests.support.sshd import SSHD, keygen, sshd_config
from tui.config.cluster import HostSpec
from tui.core.traffic_sampler import parse_ss

#: One file per reserved /24 (``10.A.B``), its content a :class:`_Record`.
LOCKS = Path("/run/tfdist-netlab")
#: Second octets the labs draw their /24 from (10.200.0.0 - 10.249.255.0).
SECOND_OCTETS = range(200, 250)
SSH_PORT = 22
START_TIMEOUT = 15.0
#: How long a killed sshd (or a process left in a namespace) may take to go.
GONE_WITHIN = 5.0


class LabError(RuntimeError):
    """Making or changing the lab failed."""


class LabUnavailable(LabError):
    """This machine cannot make a lab (not root, no iproute2/sshd, namespaces not allowed)."""


def missing_requirements() -> str | None:
    """Why no lab can be made here, or None."""
    if os.geteuid() != 0:
        return "the host lab needs root (network namespaces, veths, a bridge)"
    for tool in ("ip", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/run installs iproute2 and openssh)"
    if not SSHD.exists():
        return "openssh-server is not installed (.ci/run installs it)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        kind = LabUnavailable if "Operation not permitted" in result.stderr else LabError
        raise kind(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class _Record:
    """What a lab made, kept in its lock file so that a lab whose owner died can be torn down."""

    owner: int
    bridge: str | None = None
    namespaces: list[str] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    sshds: list[int] = field(default_factory=list)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))


def _undo(record: _Record) -> list[str]:
    """Tear down what ``record`` lists, in reverse order of making; the errors met."""
    errors: list[str] = []
    for pid in record.sshds:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for namespace in record.namespaces:
        # Whatever still runs in one of our namespaces was started through our sshd.
        for word in _ip("netns", "pids", namespace, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(word), signal.SIGKILL)
    deadline = time.monotonic() + GONE_WITHIN
    for namespace in record.namespaces:
        while _ip("netns", "pids", namespace, check=False).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.05)  # SIGKILLed processes of another parent: nothing to await
    for veth in record.veths:  # deleting one end deletes the pair
        result = _ip("link", "del", veth, check=False)
        if result.returncode != 0 and "Cannot find" not in result.stderr:
            errors.append(result.stderr.strip())
    for namespace in record.namespaces:
        result = _ip("netns", "del", namespace, check=False)
        if result.returncode != 0 and "No such file" not in result.stderr:
            errors.append(result.stderr.strip())
    if record.bridge:
        result = _ip("link", "del", record.bridge, check=False)
        if result.returncode != 0 and "Cannot find" not in result.stderr:
            errors.append(result.stderr.strip())
    return errors


def reap_abandoned() -> None:
    """Tear down the labs whose owning process is gone (a test process killed mid-test)."""
    if not LOCKS.is_dir():
        return
    for path in LOCKS.iterdir():
        try:
            record = _Record(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # being written right now by its owner
        if not _pid_alive(record.owner):
            _undo(record)
            path.unlink(missing_ok=True)


def _subnets_in_use() -> set[str]:
    """The ``10.A.B`` prefixes of IPv4 addresses in the root namespace."""
    out = _ip("-4", "-o", "addr", check=False).stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            found.add(fields[fields.index("inet") + 1].rpartition(".")[0])
    return found


def _reserve_subnet(record: _Record) -> tuple[str, Path]:
    """A free ``10.A.B`` and its lock file (made with O_EXCL, so two labs never share one)."""
    LOCKS.mkdir(mode=0o755, exist_ok=True)
    in_use = _subnets_in_use()
    candidates = [f"10.{a}.{b}" for a in SECOND_OCTETS for b in range(256)]
    for prefix in random.sample(candidates, 64):
        if prefix in in_use:
            continue
        path = LOCKS / prefix
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.close(descriptor)
        record.save(path)
        return prefix, path
    raise LabError("no free 10.2xx.x.0/24 for a lab")


@dataclass(frozen=True)
class LabHost:
    """One host of the lab."""

    name: str
    namespace: str
    address: str
    #: The bridge-side end of the host's link (its "cable"), in the root namespace.
    veth: str
    sshd_pid: int


@dataclass(frozen=True)
class LinkCounters:
    """Bytes (and packets) through a host's link, seen from the bridge: ``to_host`` the host
    received, ``from_host`` it sent. Bytes count every packet's headers too."""

    to_host: int
    from_host: int
    packets: int = 0

    @property
    def total(self) -> int:
        return self.to_host + self.from_host

    def __sub__(self, other: LinkCounters) -> LinkCounters:
        return LinkCounters(self.to_host - other.to_host, self.from_host - other.from_host,
                            self.packets - other.packets)


class NetLab:
    """``count`` hosts ``h0``.. ``h{count-1}``; use as a context manager (or call
    :meth:`close`): everything made is torn down, whatever happened."""

    def __init__(self, count: int, directory: Path) -> None:
        self.id = uuid.uuid4().hex[:6]
        self.directory = directory
        self.hosts: dict[str, LabHost] = {}
        self._record = _Record(owner=os.getpid())
        self._sshds: list[subprocess.Popen[bytes]] = []
        self._lock: Path | None = None
        why = missing_requirements()
        if why:
            raise LabUnavailable(why)
        reap_abandoned()
        try:
            self._make(count)
        except BaseException:
            self.close()
            raise

    # -- making ---------------------------------------------------------------------------

    def _save(self) -> None:
        if self._lock is not None:
            self._record.save(self._lock)

    def _make(self, count: int) -> None:
        self.prefix, self._lock = _reserve_subnet(self._record)
        self.gateway = f"{self.prefix}.1"
        bridge = f"tf{self.id}"
        self._record.bridge = bridge
        self._save()
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        self.host_key = keygen(self.directory / "host_key", f"lab {self.id} hosts")
        self.user_key = keygen(self.directory / "user_key", f"lab {self.id} user")
        for index in range(count):
            namespace, veth, inner = f"tf{self.id}h{index}", f"tf{self.id}v{index}", f"tf{self.id}p{index}"
            address = f"{self.prefix}.{index + 2}"
            self._record.namespaces.append(namespace)
            self._save()
            _ip("netns", "add", namespace)
            self._record.veths.append(veth)
            self._save()
            _ip("link", "add", veth, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", namespace)
            _ip("-n", namespace, "link", "set", inner, "name", "eth0")
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("link", "set", veth, "master", bridge)
            _ip("link", "set", veth, "up")
            self.hosts[f"h{index}"] = LabHost(f"h{index}", namespace, address, veth, sshd_pid=0)
        self.known_hosts = self.directory / "known_hosts"
        key = " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])
        self.known_hosts.write_text("".join(f"{h.address} {key}\n" for h in self.hosts.values()))
        self._start_sshds()

    def _start_sshds(self) -> None:
        # All at once, then wait for each: sshd takes a while to start on a loaded machine.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        for name, host in self.hosts.items():
            config = sshd_config(self.directory / f"sshd_{name}", SSH_PORT, (host.address,),
                                 self.host_key, self.user_key.with_suffix(".pub"))
            with (self.directory / f"sshd_{name}.log").open("ab") as log:
                # ip netns exec execs sshd itself: the pid is sshd's.
                process = subprocess.Popen(["ip", "netns", "exec", host.namespace, str(SSHD), "-D", "-e",
                                            "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=log)
            self._sshds.append(process)
            self._record.sshds.append(process.pid)
            self._save()
            self.hosts[name] = LabHost(name, host.namespace, host.address, host.veth, process.pid)
        deadline = time.monotonic() + START_TIMEOUT
        for (name, host), process in zip(self.hosts.items(), self._sshds, strict=True):
            while process.poll() is None and not _listening(host.address) and time.monotonic() < deadline:
                time.sleep(0.05)  # sshd says nothing when it listens
            if process.poll() is not None or not _listening(host.address):
                said = (self.directory / f"sshd_{name}.log").read_text()[-2000:]
                raise LabError(f"sshd of lab host {name} did not start: {said}")

    # -- using ----------------------------------------------------------------------------

    def host_spec(self, name: str, *, workdir: Path | str, python: str | None = None,
                  env: Mapping[str, str] | None = None, hostname: str | None = None) -> HostSpec:
        """A hosts.yaml entry reaching lab host ``name`` over SSH as root (the lab's key and
        known_hosts); ``hostname`` names the entry (default ``name``)."""
        return HostSpec(name=hostname or name, address=self.hosts[name].address, port=SSH_PORT,
                        user="root", identity=str(self.user_key), known_hosts=str(self.known_hosts),
                        python=python or sys.executable, workdir=str(workdir), env=dict(env or {}))

    def yaml_entry(self, name: str, *, workdir: Path | str, python: str | None = None,
                   env: Mapping[str, str] | None = None) -> dict[str, object]:
        """:meth:`host_spec` as a hosts.yaml ``hosts:`` entry."""
        return host_entry(self.host_spec(name, workdir=workdir, python=python, env=env))

    def run(self, name: str, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside host ``name``'s namespace (not over SSH)."""
        return subprocess.run(["ip", "netns", "exec", self.hosts[name].namespace, *argv], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def cap(self, name: str, rate: str = "100mbit", burst: str = "64kb", latency: str = "50ms") -> None:
        """Limit host ``name``'s link both ways with ``tc tbf`` (on both ends of its veth)."""
        if shutil.which("tc") is None:
            raise LabUnavailable("tc is not installed (iproute2)")
        host = self.hosts[name]
        tbf = ["tbf", "rate", rate, "burst", burst, "latency", latency]
        for prefix in ([], ["ip", "netns", "exec", host.namespace]):
            device = host.veth if not prefix else "eth0"
            subprocess.run([*prefix, "tc", "qdisc", "replace", "dev", device, "root", *tbf],
                           check=True, capture_output=True, stdin=subprocess.DEVNULL)

    def uncap(self, name: str) -> None:
        """Lift :meth:`cap` from host ``name``'s link (both ends back to the default queue)."""
        host = self.hosts[name]
        for prefix in ([], ["ip", "netns", "exec", host.namespace]):
            device = host.veth if not prefix else "eth0"
            subprocess.run([*prefix, "tc", "qdisc", "del", "dev", device, "root"],
                           check=True, capture_output=True, stdin=subprocess.DEVNULL)

    def cut(self, name: str) -> None:
        """Pull host ``name``'s cable: its bridge-side veth down."""
        _ip("link", "set", self.hosts[name].veth, "down")

    def restore(self, name: str) -> None:
        """Plug host ``name``'s cable back in."""
        _ip("link", "set", self.hosts[name].veth, "up")

    def counters(self, name: str) -> LinkCounters:
        """The bytes through host ``name``'s link so far (the bridge side's tx is the host's rx)."""
        statistics = Path("/sys/class/net") / self.hosts[name].veth / "statistics"

        def read(counter: str) -> int:
            return int((statistics / counter).read_text())

        return LinkCounters(to_host=read("tx_bytes"), from_host=read("rx_bytes"),
                            packets=read("tx_packets") + read("rx_packets"))

    def served_bytes(self, name: str, port: int) -> dict[tuple[str, str], int]:
        """Bytes (both ways) of each established TCP connection to ``port`` of host ``name``
        (its sshd's: the controller's sessions), from the host's own ``ss``."""
        listing = self.run(name, "ss", "-tinH", "state", "established", f"( sport = :{port} )").stdout
        sockets = parse_ss(listing)
        return {(s.local, s.peer): s.bytes_sent + s.bytes_received for s in sockets}

    def pids(self, name: str) -> list[int]:
        """Every process inside host ``name``'s namespace."""
        return [int(p) for p in _ip("netns", "pids", self.hosts[name].namespace).stdout.split()]

    def leftovers(self, name: str) -> list[int]:
        """Processes in host ``name`` other than its listening sshd (a session's sshd counts:
        a connection still open)."""
        return [pid for pid in self.pids(name) if pid != self.hosts[name].sshd_pid]

    # -- tearing down ---------------------------------------------------------------------

    def close(self) -> None:
        """Tear down everything this lab recorded (sshds by pid, then links, namespaces,
        the bridge) and give its subnet back. Safe to call twice."""
        for process in self._sshds:  # our children: kill and reap them first
            process.kill()
            process.wait()
        self._sshds.clear()
        errors = _undo(self._record)
        self._record = _Record(owner=self._record.owner)
        if self._lock is not None:
            self._lock.unlink(missing_ok=True)
            self._lock = None
        if errors:
            raise RuntimeError(f"lab {self.id} teardown: {errors}")

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _listening(address: str) -> bool:
    try:
        with socket.create_connection((address, SSH_PORT), timeout=0.5):
            return True
    except OSError:
        return False


def namespaces() -> set[str]:
    """Names of every network namespace on the machine (for teardown checks)."""
    return {line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()}


def links() -> set[str]:
    """Names of every link in the root namespace."""
    return {line.split()[0].partition("@")[0] for line in _ip("-br", "link", check=False).stdout.splitlines()
            if line.strip()}
