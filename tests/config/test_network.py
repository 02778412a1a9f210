"""hosts.yaml ``network:`` (tui.config.network): the defaults, values as written, and a
located error for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.test_load import CLUSTER, fail, load
from tui.config.network import LEASE_MARGIN, NetworkSettings, OnHostFailure


def test_absent_means_the_defaults(tmp_path: Path) -> None:
    network = load(tmp_path, CLUSTER).network
    assert network == NetworkSettings()
    assert network.unreachable_timeout > network.gone_after == network.lease + LEASE_MARGIN


def test_values_as_written(tmp_path: Path) -> None:
    network = load(tmp_path, CLUSTER + "network:\n  unreachable_timeout: 60\n  lease: 8\n").network
    assert network == NetworkSettings(unreachable_timeout=60.0, lease=8.0)
    assert load(tmp_path, CLUSTER + "network: {lease: 5}\n").network.lease == 5.0
    assert NetworkSettings().hosts_at_once == 32  # pdsh's fan-out
    assert load(tmp_path, CLUSTER + "network: {hosts_at_once: 4}\n").network.hosts_at_once == 4
    assert NetworkSettings().on_host_failure is OnHostFailure.FAIL
    assert load(tmp_path, CLUSTER + "network: {on_host_failure: start_without}\n").network.on_host_failure \
        is OnHostFailure.START_WITHOUT


@pytest.mark.parametrize(("text", "line", "column", "fragment"), [
    ("network: 5\n", 4, 10, "network: expected a mapping of unreachable_timeout:, lease:, hosts_at_once:, "
                             "on_host_failure:"),
    ("network: {lease: 30, timeout: 9}\n", 4, 22, "timeout"),
    ("network: {lease: 1}\n", 4, 18, "network.lease: expected a number >= 3"),
    ("network: {lease: forever}\n", 4, 18, "network.lease"),
    ("network: {unreachable_timeout: 35}\n", 4, 32, "must be more than lease + 10 s (40 s)"),
    ("network: {lease: 20, unreachable_timeout: 25}\n", 4, 43, "must be more than lease + 10 s (30 s)"),
    ("network: {lease: 295}\n", 4, 18, "raise unreachable_timeout too"),
    ("network: {hosts_at_once: 0}\n", 4, 26, "network.hosts_at_once: expected a whole number >= 1"),
    ("network: {hosts_at_once: 2.5}\n", 4, 26, "network.hosts_at_once"),
    ("network: {on_host_failure: continue}\n", 4, 28,
     "network.on_host_failure: expected one of fail, start_without, got 'continue'"),
])
def test_mistakes_are_located(tmp_path: Path, text: str, line: int, column: int, fragment: str) -> None:
    fail(tmp_path, CLUSTER + text, line, column, fragment)
