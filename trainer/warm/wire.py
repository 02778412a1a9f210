"""The fork server's wire format, shared by the server and its clients (the controller's
local launcher, and :mod:`trainer.warm.client` on a remote host). Standard library only.

A request is one message on a fresh connection: a 4-byte big-endian length and that many
bytes of JSON (:class:`Request`), sent in one ``sendmsg`` that carries the task's stdin,
stdout and stderr as SCM_RIGHTS. Replies are JSON lines: ``{"pid": N}`` or
``{"refused": "why"}``, then ``{"exit": CODE}`` (negative: killed by that signal)."""

from __future__ import annotations

import array
import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

_LENGTH = struct.Struct(">I")
#: A request larger than this is refused (an environment is a few kB).
MAX_REQUEST = 4 << 20


class WireError(Exception):
    """The peer sent something that is not a request or a reply."""


@dataclass(frozen=True)
class Request:
    """One task to fork: what ``exec`` would have been given."""

    argv: tuple[str, ...]          # the module's arguments, without ``python -m MODULE``
    env: dict[str, str]            # the task's whole environment
    cwd: str | None = None
    #: The client's process: for a remote client, the server reports to it.
    extra: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        body = json.dumps({"argv": list(self.argv), "env": self.env, "cwd": self.cwd,
                           "extra": self.extra}).encode()
        return _LENGTH.pack(len(body)) + body

    @classmethod
    def decode(cls, body: bytes) -> Request:
        try:
            data = json.loads(body)
            argv = tuple(str(a) for a in data["argv"])
            env = {str(k): str(v) for k, v in dict(data["env"]).items()}
            cwd = data.get("cwd")
            return cls(argv, env, str(cwd) if cwd else None, dict(data.get("extra") or {}))
        except (ValueError, KeyError, TypeError) as exc:
            raise WireError(f"not a request: {exc}") from exc


def send_request(sock: socket.socket, request: Request, fds: tuple[int, int, int]) -> None:
    """Send ``request`` with the task's three standard streams (blocking socket)."""
    data = request.encode()
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
    sent = sock.sendmsg([data], rights)
    if sent < len(data):
        sock.sendall(data[sent:])


def recv_request(sock: socket.socket) -> tuple[Request, list[int]]:
    """Read one request and the descriptors that came with it (blocking socket). The caller
    owns the descriptors, also when this raises after receiving them."""
    fds: list[int] = []
    head, ancillary, _, _ = sock.recvmsg(_LENGTH.size, socket.CMSG_SPACE(3 * array.array("i").itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(payload[:len(payload) - len(payload) % got.itemsize])
            fds.extend(got)
    try:
        while len(head) < _LENGTH.size:
            more = sock.recv(_LENGTH.size - len(head))
            if not more:
                raise WireError("connection closed inside a request")
            head += more
        (length,) = _LENGTH.unpack(head)
        if length > MAX_REQUEST:
            raise WireError(f"request of {length} bytes")
        body = b""
        while len(body) < length:
            more = sock.recv(min(1 << 16, length - len(body)))
            if not more:
                raise WireError("connection closed inside a request")
            body += more
        if len(fds) != 3:
            raise WireError(f"a request carries 3 descriptors, this one {len(fds)}")
        return Request.decode(body), fds
    except BaseException:
        for fd in fds:
            _close(fd)
        raise


def reply(sock: socket.socket, **fields: Any) -> None:
    """One JSON reply line; a client that went away is not an error."""
    try:
        sock.sendall(json.dumps(fields).encode() + b"\n")
    except OSError:
        pass


def parse_reply(line: bytes) -> dict[str, Any]:
    """A reply line as a dict; WireError if it is not one."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise WireError(f"not a reply: {line[:80]!r}") from exc
    if not isinstance(data, dict):
        raise WireError(f"not a reply: {line[:80]!r}")
    return data


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
