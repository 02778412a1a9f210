"""Claim the task's own port from the moment the process starts, not from the moment
TensorFlow's server binds it seconds later.

Two controllers started at the same moment on the same fixed ports both find the ports free
and launch; without a claim both tasks import TensorFlow, and the later server fails with
TensorFlow's "Could not start gRPC server", which does not name the port. With a claim the
first task holds the port (a listening socket: no other socket can bind the port then, with
or without SO_REUSEADDR) and the second fails at once, saying the port is in use. The claim
is dropped right before the real server binds (:func:`release`).

An ``auto`` port is different: the controller itself holds it until it sends ``go`` to a
held task (``--hold``), and says so with :data:`trainer.protocol.PORT_HELD_ENV`; such a task
does not claim it."""

from __future__ import annotations

import contextlib
import errno
import socket

_held: list[socket.socket] = []


class PortInUse(Exception):
    """The port is taken; the message names it and the OS's reason."""


def claim(address: str) -> None:
    """Hold ``address``'s port on every local interface (IPv4, and IPv6 where there is
    one), as TensorFlow's server will bind it. Raises :class:`PortInUse`."""
    port = int(address.rpartition(":")[2])
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    for family, wildcard in families:
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this machine
        try:
            # SO_REUSEADDR as gRPC sets it: connections of an earlier run lingering in
            # TIME_WAIT do not count; a listener (another task, or another claim) does.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((wildcard, port))
            # A deep backlog: a peer connecting early waits in it and is reset when the claim
            # is released, instead of having its SYNs dropped and retried a second later.
            sock.listen(socket.SOMAXCONN)
        except OSError as exc:
            sock.close()
            release()
            if exc.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6:
                continue
            reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise PortInUse(f"port {port} of {address} cannot be used: {reason} (another task, "
                            "or another controller started at the same moment, has it)") from None
        _held.append(sock)


def release() -> None:
    """Let the port go, for the real server to bind it."""
    while _held:
        with contextlib.suppress(OSError):
            _held.pop().close()
