"""Which failures of an async training step may pass, and how long the worker waits before
each try again (trainer/loop.py, ``Worker.step``): a connection reset, a ps that could not
connect to this worker's own address, a request a peer received twice, a step that did not end
within its deadline. Anything else ends the step."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Any

#: Waits before each retry of a training step that failed on a connection reset. A peer's
#: gRPC channel to this task's address may still be the TCP connection of the task's previous
#: launch (a ps whose host was cut off kept it): the first call on it is reset, the ps then
#: cancels the step (AbortedError), and gRPC reconnects for the next. A restart that came
#: within a second of the link's return failed its first step on that and was restarted
#: again. A ps that is gone refuses the retries at once: the step fails as before, 1 s later.
RESET_RETRY_SECS = (0.1, 0.3, 0.6)
#: What a connection reset says in TensorFlow's UnavailableError (gRPC's status text). A
#: write to a connection the peer has reset says "Broken pipe" instead (sendmsg's EPIPE): a
#: worker's first step after a 20 s ps cut failed so in RegisterGraph, and cost a restart.
RESET_SIGNS = ("Connection reset by peer", "Broken pipe")
#: Waits before each retry of a training step that a ps failed because it could not connect to
#: this worker's own address. A ps that called the address while no task listened there (the
#: worker's previous launch gone, this one not yet serving) keeps its gRPC channel to it in
#: reconnect backoff, and fails every call on it at once, until its next attempt: up to 1.2 s
#: later (TensorFlow caps gRPC's backoff at 1 s; gRPC adds up to 20 % jitter). A restarted
#: worker's first step failed on that and cost a restart (seen on the lab after a 20 s ps cut;
#: 1.0 s measured from the failure to the first step that passed). These outlast 1.2 s; a ps
#: that cannot reach this worker for good still fails the step, 1.4 s later. Any step, not only
#: the first after a start: a ps's channel to this address can back off later too (a link that
#: flapped while the ps reconnected), and with this bound a retry costs no more there.
REFUSED_RETRY_SECS = (0.1, 0.3, 0.5, 0.5)
#: What a ps's UnavailableError says when its channel to an address has no connection, gRPC's
#: "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.3:2222: Failed
#: to connect to remote host: Connection refused" (TensorFlow 2.21). Either part is enough:
#: the address named in the text, not these words, says whose the failure is.
REFUSED_SIGNS = ("failed to connect to all addresses", "Connection refused")
#: Waits before each retry of a training step a peer refused as a duplicate: TensorFlow's
#: worker service remembers recent request ids and aborts a RunGraph whose id it has seen
#: ("The same RunGraph (Worker) request was received twice"), which gRPC's own resend after
#: a channel reset produces. The first copy ran; only this call's answer is lost, so a new
#: step (a new request id) is safe in async mode. Seen ending workers of fault-free 8-minute
#: lab runs, and on an untouched host after another host's cut.
DUPLICATE_RETRY_SECS = (0.1, 0.3, 0.6)
#: What TensorFlow's AbortedError says of a duplicate request (RecentRequestIds).
DUPLICATE_SIGNS = ("request was received twice",)
#: Waits before each retry of a training step that did not end within its deadline. What the
#: deadline catches is a call whose answer can no longer come: its TCP connection died on the
#: far side while the link was cut (gRPC's 20 s TCP user timeout there), the reset that said so
#: was lost with the link, and this side, with nothing of its own left to send, waits on it for
#: good. The next call on that connection is answered by a reset, after which gRPC connects
#: again: the reset's own retries follow from this schedule.
DEADLINE_RETRY_SECS = RESET_RETRY_SECS
#: An address in gRPC's error text: "ipv4:10.0.0.3:2222", "ipv6:%5B::1%5D:2222".
_GRPC_ADDRESS = re.compile(r"ipv4:(\d+\.\d+\.\d+\.\d+):(\d+)|ipv6:(?:%5B|\[)([0-9A-Fa-f:.]+)(?:%5D|\]):(\d+)")


@dataclass(frozen=True)
class Passing:
    """A step's failure that may pass: the waits before each retry, and what the log says."""

    waits: tuple[float, ...]
    says: str


def passing(errors: Any, exc: Exception, port: int, deadline: float) -> Passing | None:
    """What to do about a step's UnavailableError, AbortedError or DeadlineExceededError
    (``errors``: TensorFlow's ``tf.errors``) that may pass, for a worker listening on ``port``
    whose try had ``deadline`` seconds; None: it ends the step (an AbortedError may still be
    the step a ps cancels after one that may)."""
    text = str(exc)
    if isinstance(exc, errors.DeadlineExceededError):
        return Passing(DEADLINE_RETRY_SECS, f"as it did not end within {deadline:g} s (a peer's "
                       "connection may have died without a word)")
    if isinstance(exc, errors.AbortedError):
        if any(sign in text for sign in DUPLICATE_SIGNS):
            return Passing(DUPLICATE_RETRY_SECS, "as a peer received its request twice "
                           "(a call resent after a connection reset)")
        return None
    if any(sign in text for sign in RESET_SIGNS):
        return Passing(RESET_RETRY_SECS, "on a connection reset by a peer")
    if any(sign in text for sign in REFUSED_SIGNS) and names_own_address(text, port):
        return Passing(REFUSED_RETRY_SECS, "as a ps could not connect to this worker's address "
                       "(its channel to it may still be waiting to reconnect)")
    return None


def names_own_address(text: str, port: int) -> bool:
    """Whether ``text`` names an address of this worker: ``port`` on one of this host's
    addresses. (The ps may know the host by another name or address than the cluster's,
    and this worker's server listens on every address of the host.)"""
    for match in _GRPC_ADDRESS.finditer(text):
        ip4, port4, ip6, port6 = match.groups()
        if int(port4 or port6) == port and is_local(ip4 or ip6):
            return True
    return False


def is_local(ip: str) -> bool:
    """Whether ``ip`` is an address of this host: only such an address can be bound."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((ip, 0))
    except OSError:
        return False
    return True
