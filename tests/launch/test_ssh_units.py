"""Pure pieces of the SSH launcher: jump routes, known_hosts names, policies, directories,
snippet answers, closing connections whose peer never answers."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from tui.config.cluster import HostSpec
from tui.launch import snippets
from tui.launch.base import HostInfo, resolve_remote_dir
from tui.launch.errors import HostError, HostFailure
from tui.launch.ssh import remote_host
from tui.launch.ssh.connect import jump_route, parse_hop
from tui.launch.ssh.hostkeys import HostKeyPolicy, host_pattern


def test_a_hop_is_user_host_port() -> None:
    assert parse_hop("bastion") == HostSpec(name="bastion", address="bastion")
    assert parse_hop("ops@bastion:2222") == HostSpec(name="ops@bastion:2222", address="bastion",
                                                     port=2222, user="ops")
    assert parse_hop("[::1]:2200") == HostSpec(name="[::1]:2200", address="::1", port=2200)


def test_jump_routes_follow_entries_and_chains() -> None:
    hosts = {
        "outer": HostSpec(name="outer", address="10.0.0.1"),
        "inner": HostSpec(name="inner", address="10.0.0.2", jump="outer"),
        "gpu": HostSpec(name="gpu", address="10.0.0.3", jump="inner, me@relay:23"),
    }
    route = jump_route(hosts["gpu"], hosts)
    assert [(h.address, h.port, h.user) for h in route] == [
        ("10.0.0.1", 22, None), ("10.0.0.2", 22, None), ("relay", 23, "me")]
    assert jump_route(hosts["outer"], hosts) == []


def test_a_jump_loop_is_cut_off() -> None:
    hosts = {"a": HostSpec(name="a", address="a", jump="b"), "b": HostSpec(name="b", address="b", jump="a")}
    with pytest.raises(HostError) as loop:
        jump_route(hosts["a"], hosts)
    assert loop.value.failure is HostFailure.UNREACHABLE and "loop" in loop.value.detail


def test_known_hosts_names() -> None:
    assert host_pattern("gpu1", 22) == "gpu1"
    assert host_pattern("10.0.0.2", 2222) == "[10.0.0.2]:2222"


def test_host_key_policies() -> None:
    assert HostKeyPolicy.from_flags() is HostKeyPolicy.STRICT
    assert HostKeyPolicy.from_flags(accept_new_host_keys=True) is HostKeyPolicy.ACCEPT_NEW
    assert HostKeyPolicy.from_flags(insecure_no_host_key_check=True) is HostKeyPolicy.INSECURE
    with pytest.raises(ValueError):
        HostKeyPolicy.from_flags(True, True)


def test_task_directories_are_made_absolute_on_the_host() -> None:
    info = HostInfo(name="h", python="python3", python_version="3.11", tf_version="2.16",
                    workdir="/home/u/tfdist", home="/home/u", trainer_path="/home/u/tfdist/trainer-x",
                    uploaded=False, configured_workdir="~/tfdist")
    assert resolve_remote_dir("~/tfdist", info) == "/home/u/tfdist"
    assert resolve_remote_dir("~", info) == "/home/u"
    assert resolve_remote_dir("~/other", info) == "/home/u/other"
    assert resolve_remote_dir("runs", info) == "/home/u/runs"
    assert resolve_remote_dir("/srv/x", info) == "/srv/x"


def test_snippet_answers() -> None:
    assert snippets.parse_result("noise\ntfdist-result [1, 2]\n") == [1, 2]
    assert snippets.parse_result("tfdist-result {bad") is None
    assert snippets.parse_result("") is None
    assert "def main" in snippets.source("probe")


class _SilentPeer:
    """A connection whose peer never answers the close (a cut link, a jump host gone)."""

    def __init__(self) -> None:
        self.closed = self.aborted = False

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        await asyncio.Event().wait()

    def abort(self) -> None:
        self.aborted = True


async def test_a_peer_that_never_answers_the_close_is_dropped_after_the_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_host, "CLOSE_WAIT", 0.2)
    peers = [_SilentPeer(), _SilentPeer()]
    began = time.monotonic()
    await asyncio.wait_for(remote_host.close_connections(cast(Any, peers)), 10)
    assert all(p.closed and p.aborted for p in peers)
    assert time.monotonic() - began < 5
