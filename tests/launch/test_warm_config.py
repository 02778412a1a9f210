"""Switching warm starts off: ``warm: false`` per host in hosts.yaml, ``--cold`` for a run;
and the router handing the switch to both launchers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.cli import build_parser
from tui.config.cluster import HostKind
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.launch.router import Router

CLUSTER = "cluster: {ps: [gpu1:2222], worker: [localhost:auto]}\n"


def test_warm_is_on_unless_a_host_says_false(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  gpu1: {warm: false}\n  gpu2: {}\n" + CLUSTER)
    config = load_config(hosts)
    assert config.hosts["gpu1"].warm is False
    assert config.hosts["gpu2"].warm is True


def test_warm_must_be_true_or_false(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  gpu1: {warm: sometimes}\n" + CLUSTER)
    with pytest.raises(ConfigError, match="warm"):
        load_config(hosts)


def test_cold_flag_reaches_both_launchers() -> None:
    assert build_parser().parse_args(["hosts.yaml", "--cold"]).cold is True
    assert build_parser().parse_args(["hosts.yaml"]).cold is False
    router = Router(warm=False)
    assert router.local._warm_on is False  # type: ignore[attr-defined]
    assert router._options[HostKind.SSH]["warm"] is False
    assert Router().local._warm_on is True  # type: ignore[attr-defined]
