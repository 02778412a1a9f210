"""Remote port checks, like :mod:`tui.launch.local.ports` but standard library only.

``python -c SOURCE check PORT...`` reports which ports a server could not listen on now
(and, when /proc tells, which process holds each). ``python -c SOURCE hold N AVOID...``
binds N free ports (none in AVOID), reports them, and keeps them bound until it reads
``release PORT`` on stdin (answering ``released PORT``) or stdin ends.

TensorFlow's gRPC server binds ``[::]:port`` with SO_REUSEADDR, so a port is usable when
wildcard IPv4 and IPv6 binds with SO_REUSEADDR both succeed."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys

RESULT_PREFIX = "tfdist-result "


def has_ipv6() -> bool:
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def bind(family: socket.AddressFamily, port: int, reuse: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(("::", port))
        else:
            sock.bind(("0.0.0.0", port))
        return sock
    except BaseException:
        sock.close()
        raise


def families() -> list[socket.AddressFamily]:
    return [socket.AF_INET] + ([socket.AF_INET6] if has_ipv6() else [])


def problem(port: int) -> str | None:
    for family in families():
        try:
            bind(family, port, reuse=True).close()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "in use"
            if exc.errno == errno.EACCES:
                return "not permitted (privileged port)"
            return exc.strerror or str(exc)
    return None


def listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    inodes.discard("0")
    return inodes


def holder(port: int) -> tuple[int, str] | None:
    """The pid and name of a process with a socket on ``port`` (our own processes only,
    unless we are root)."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    if not wanted:
        return None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{name}/fd"):
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted:
                    with open(f"/proc/{name}/comm") as f:
                        return int(name), f.read().strip()
        except OSError:
            continue
    return None


def check(ports: list[int]) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for port in ports:
        reason = problem(port)
        if reason is None:
            continue
        held = holder(port)
        found.append({"port": port, "reason": reason,
                      "pid": held[0] if held else None, "name": held[1] if held else None})
    return found


def reserve(n: int, avoid: set[int], attempts: int = 1000) -> dict[int, list[socket.socket]]:
    held: dict[int, list[socket.socket]] = {}
    rejected = []  # kept bound until the end so the kernel does not offer them again
    v6 = has_ipv6()
    for _ in range(attempts):
        if len(held) == n:
            break
        v4 = bind(socket.AF_INET, 0, reuse=False)
        port = v4.getsockname()[1]
        if port in avoid:
            rejected.append(v4)
            continue
        sockets = [v4]
        if v6:
            try:
                sockets.append(bind(socket.AF_INET6, port, reuse=False))
            except OSError:
                rejected.append(v4)
                continue
        held[port] = sockets
    for sock in rejected:
        sock.close()
    return held


def hold(n: int, avoid: set[int]) -> None:
    held = reserve(n, avoid)
    if len(held) < n:
        print(RESULT_PREFIX + json.dumps({"error": f"could not find {n} free ports"}))
        return
    print(RESULT_PREFIX + json.dumps({"ports": sorted(held)}))
    sys.stdout.flush()
    for line in sys.stdin:
        words = line.split()
        if len(words) == 2 and words[0] == "release" and words[1].isdigit():
            for sock in held.pop(int(words[1]), []):
                sock.close()
            print("released " + words[1])
            sys.stdout.flush()
        if not held:
            return


def main(argv: list[str]) -> None:
    if argv[:1] == ["check"]:
        print(RESULT_PREFIX + json.dumps(check([int(p) for p in argv[1:]])))
    elif argv[:1] == ["hold"]:
        hold(int(argv[1]), {int(p) for p in argv[2:]})
    else:
        sys.exit("usage: check PORT... | hold N AVOID...")


if __name__ == "__main__":
    main(sys.argv[1:])
