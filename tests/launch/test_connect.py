"""How a host's connection is opened (tui.launch.ssh.connect), against the real sshd: TCP's
resends on it are capped, so that a host whose link comes back hears the controller within
seconds (the lab's run of it: tests/launch/test_network_faults_ps.py), and TCP gives up on it
no sooner than the keepalives do."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.ssh import SshServer
from tui.config.network import LEASE_MARGIN
from tui.launch.ssh.connect import (
    KEEPALIVE_INTERVAL,
    RTO_MAX_MS,
    TCP_RTO_MAX_MS,
    ConnectOptions,
    bound_resends,
    open_connection,
)

pytestmark = pytest.mark.timeout(60)


def _kernel_caps_resends() -> bool:
    with socket.socket() as probe:
        try:
            probe.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, RTO_MAX_MS)
        except OSError:
            return False
    return True


@pytest.mark.skipif(not _kernel_caps_resends(), reason="TCP_RTO_MAX_MS needs Linux 6.15")
async def test_a_host_connection_resends_within_two_seconds_and_outlives_its_keepalives(
        sshd: SshServer, tmp_path: Path) -> None:
    spec = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work")
    options = ConnectOptions(ssh_config=None, lease=30.0)
    conn = await open_connection(spec, options)
    try:
        sock = conn.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS) == RTO_MAX_MS
        user_timeout = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) / 1000
        # The keepalives give up first (they say why); TCP's resends alone, capped, would give
        # up after 27 s, inside a 30 s lease.
        assert user_timeout == options.silence_limit
        assert user_timeout > options.keepalive_count_max * KEEPALIVE_INTERVAL > options.lease + LEASE_MARGIN
        result = await conn.run("echo still here", check=True)
        assert result.stdout == "still here\n"
    finally:
        conn.close()
        await conn.wait_closed()


def test_a_connection_without_a_tcp_socket_is_left_as_it_is() -> None:
    class Tunnelled:  # a connection through a jump host: the hop's socket carries it
        def get_extra_info(self, name: str) -> object:
            return None

    assert bound_resends(Tunnelled(), ConnectOptions()) is False  # type: ignore[arg-type]


@pytest.mark.parametrize("config_line", [None, "Ciphers chacha20-poly1305@openssh.com"],
                         ids=["preferred", "the-config-decides"])
async def test_the_connection_prefers_aes_gcm_unless_the_ssh_config_names_ciphers(
        sshd: SshServer, tmp_path: Path, config_line: str | None) -> None:
    """Every packet of an idle controller's hundreds a second is enciphered: AES-GCM costs
    asyncssh a tenth of ChaCha20-Poly1305, its first choice; a user's ``Ciphers`` wins."""
    spec = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work")
    config: tuple[str, ...] | None = None
    if config_line is not None:
        (tmp_path / "ssh_config").write_text(f"Host *\n    {config_line}\n")
        config = (str(tmp_path / "ssh_config"),)
    conn = await open_connection(spec, ConnectOptions(ssh_config=config))
    try:
        expected = "aes128-gcm@openssh.com" if config_line is None else "chacha20-poly1305@openssh.com"
        assert conn.get_extra_info("send_cipher") == expected
        assert conn.get_extra_info("recv_cipher") == expected
        result = await conn.run("echo enciphered", check=True)
        assert result.stdout == "enciphered\n"
    finally:
        conn.close()
        await conn.wait_closed()
