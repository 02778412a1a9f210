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
_INT = array.array("i")
#: The task's stdin, stdout and stderr.
_FDS = 3
#: A request larger than this is refused (an environment is a few kB).
MAX_REQUEST = 4 << 20
#: ``Request.extra[PID_LINE]``: a text the task writes on its stdout first, before anything
#: of its own, with ``{pid}`` its pid (the remote client's ``tfdist-pid N warm``: printed by
#: the client after the reply, it raced the task's first line, and lost on a busy host).
PID_LINE = "pid_line"


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
        """The request in ``body``; WireError for anything else: bad JSON, nesting too deep
        for the parser (``[`` x 200,000), or a value of the wrong type (nothing is coerced:
        an environment value that is a list is refused, not turned into its repr)."""
        try:
            data = json.loads(body)
        except RecursionError as exc:
            raise WireError("not a request: nested too deeply") from exc
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise WireError(f"not a request: {exc}") from exc
        if not isinstance(data, dict):
            raise WireError("not a request: not a JSON object")
        argv, env, cwd, extra = data.get("argv"), data.get("env"), data.get("cwd"), data.get("extra")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise WireError("not a request: argv is not a list of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise WireError("not a request: env is not an object of strings")
        if cwd is not None and not isinstance(cwd, str):
            raise WireError("not a request: cwd is not a string")
        if extra is not None and (not isinstance(extra, dict) or
                                  any(isinstance(v, (dict, list)) for v in extra.values())):
            raise WireError("not a request: extra is not an object of plain values")
        return cls(tuple(argv), dict(env), cwd or None, dict(extra or {}))


class RequestReader:
    """One request arriving on a non-blocking connection, a piece at a time, so the server
    can read many at once and give each the same deadline for the whole of it (not per
    read). :meth:`feed` on each readable event; ``fds`` are the caller's to close (also
    after a WireError), until :meth:`feed` returns the request and hands them over."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self._data = b""

    def feed(self, sock: socket.socket) -> Request | None:
        """Read what is there: the request once complete, None while more must come;
        WireError when the peer closed early or sent something that is not a request."""
        try:
            data, ancillary, _, _ = sock.recvmsg(1 << 16, socket.CMSG_SPACE(_FDS * _INT.itemsize))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            raise WireError(f"reading the request: {exc}") from exc
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[:len(payload) - len(payload) % got.itemsize])
                self.fds.extend(got)
        if len(self.fds) > _FDS:
            raise WireError(f"a request carries {_FDS} descriptors, this one more")
        if not data:
            raise WireError("connection closed inside a request")
        self._data += data
        if len(self._data) < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(self._data)
        if length > MAX_REQUEST:
            raise WireError(f"request of {length} bytes (at most {MAX_REQUEST})")
        body = self._data[_LENGTH.size:]
        if len(body) < length:
            return None
        if len(body) > length:
            raise WireError("bytes after the request")
        if len(self.fds) != _FDS:
            raise WireError(f"a request carries {_FDS} descriptors, this one {len(self.fds)}")
        return Request.decode(body)

    def close_fds(self) -> None:
        """Close the descriptors received so far (a request that failed)."""
        for fd in self.fds:
            _close(fd)
        self.fds = []


def send_request(sock: socket.socket, request: Request, fds: tuple[int, int, int]) -> None:
    """Send ``request`` with the task's three standard streams (blocking socket)."""
    data = request.encode()
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
    sent = sock.sendmsg([data], rights)
    if sent < len(data):
        sock.sendall(data[sent:])


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
