"""A ``kind: slurm`` hosts entry: what it asks salloc for, and every mistake refused at its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.config.cluster import HostKind
from tui.config.load import load_config
from tui.config.yamlload import ConfigError

CLUSTER = "cluster: {ps: [hpc:auto], worker: [hpc:auto, hpc:auto]}\n"


def load(tmp_path: Path, entry: str) -> object:
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts:\n  hpc: {{kind: slurm{entry}}}\n{CLUSTER}")
    return load_config(path)


def test_an_entry_becomes_salloc_options(tmp_path: Path) -> None:
    config = load(tmp_path, ', partition: debug, nodes: 2, time: "01:00:00", account: proj, '
                            'extra: [--qos=normal], pending_timeout: 60')
    host = config.hosts["hpc"]  # type: ignore[attr-defined]
    assert host.launch_kind is HostKind.SLURM and not host.is_local
    assert host.slurm.salloc_options() == ["--nodes=2", "--partition=debug", "--time=01:00:00",
                                           "--account=proj", "--qos=normal"]
    assert host.slurm.pending_timeout == 60
    line = (tmp_path / "hosts.yaml").read_text().splitlines()[1]
    assert host.slurm.places["partition"] == f"{tmp_path / 'hosts.yaml'}:2:{line.index('debug') + 1}"


def test_defaults_leave_the_choice_to_slurm(tmp_path: Path) -> None:
    slurm = load(tmp_path, "").hosts["hpc"].slurm  # type: ignore[attr-defined]
    assert slurm.salloc_options() == ["--nodes=1"] and slurm.pending_timeout == 300


@pytest.mark.parametrize(("entry", "at", "message"), [
    (", nodes: 0", "0", "hosts.hpc.nodes: expected a whole number >= 1"),
    (", time: soon", "soon", "hosts.hpc.time: expected a Slurm time limit"),
    (", partition: 'a b'", "'a b'", "is not a Slurm partition name"),
    (", extra: [qos]", "qos", "expected an salloc option such as --qos=normal"),
    (", extra: [--nodes=3]", "--nodes=3", "--nodes is salloc's --nodes, which the controller sets"),
    (", extra: [-J, x]", "-J", "-J is salloc's --job-name, which the controller sets"),
    # Issue 33: as salloc reads them: abbreviations, bundles, values attached or separate.
    (", extra: [--no-sh]", "--no-sh", "--no-sh is salloc's --no-shell"),
    (", extra: [--job-n=x]", "--job-n=x", "--job-n is salloc's --job-name"),
    (", extra: [--qos, normal, --no]", "--no", "--no is salloc's --nodes or --no-shell"),
    (", extra: [-vN2]", "-vN2", "-N (in -vN2) is salloc's --nodes"),
    (", extra: [-Jx]", "-Jx", "-J (in -Jx) is salloc's --job-name"),
    (", extra: [--bell, --no-shell]", "--no-shell", "--no-shell is salloc's --no-shell"),
    (", extra: [--qos=normal, --]", "--", "got '--' (salloc would run it as the job's command)"),
    (", extra: [--time]", "--time", "--time needs a value after it"),
    (", pending_timeout: 0", "0", "expected a number >= 1"),
    (", address: node1", "address", "a kind: slurm entry has no address:"),
    (", partitoin: debug", "partitoin", "unknown key 'partitoin'"),
])
def test_bad_settings_are_refused_where_they_are(tmp_path: Path, entry: str, at: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, entry)
    line = (tmp_path / "hosts.yaml").read_text().splitlines()[1]
    column = line.rindex(at) + 1  # the bad value is the last thing written
    assert (caught.value.line, caught.value.column) == (2, column), str(caught.value)
    assert message in caught.value.message


def test_a_value_word_is_not_read_as_an_option(tmp_path: Path) -> None:
    """``--comment --no-shell``: salloc takes the second word as the comment, and so do we."""
    config = load(tmp_path, ", extra: [--comment, --no-shell, -p, -J]")
    slurm = config.hosts["hpc"].slurm
    assert slurm is not None and slurm.extra == ("--comment", "--no-shell", "-p", "-J")


def test_slurm_keys_belong_to_slurm_entries(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  gpu1: {address: 10.0.0.1, partition: debug}\n"
                    "cluster: {ps: [gpu1:auto], worker: [gpu1:auto]}\n")
    with pytest.raises(ConfigError, match=r"hosts.gpu1.partition: only a kind: slurm entry has partition:"):
        load_config(path)


def test_the_run_directory_records_the_entry_as_hosts_yaml_writes_it(tmp_path: Path) -> None:
    from tui.core.rundir import resolved_config

    config = load(tmp_path, ", partition: debug, nodes: 2, extra: [--qos=normal]")
    recorded = resolved_config(config, config.training, ())  # type: ignore[attr-defined]
    assert recorded["hosts"]["hpc"] == {"kind": "slurm", "env": {}, "warm": True, "partition": "debug",
                                        "nodes": 2, "extra": ["--qos=normal"], "pending_timeout": 300.0}


def test_a_task_may_name_a_node_of_a_slurm_host_only(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  hpc: {kind: slurm}\n"
                    "cluster: {ps: [hpc:auto], worker: [{host: hpc, node: n3}]}\n")
    assert load_config(path).tasks[1].node == "n3"
    path.write_text("cluster: {ps: [localhost:auto], worker: [{host: localhost, node: n3}]}\n")
    with pytest.raises(ConfigError, match="worker0: node: names a node of a kind: slurm host"):
        load_config(path)
