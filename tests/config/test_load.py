"""Tests for tui.config.load: hosts.yaml parsing, and a located ConfigError for every mistake."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from textwrap import dedent

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer.settings import FIELD_NAMES, Dataset, Mode, Model, Optimizer, PlacementStrategy, TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, RestartMode, RestartPolicy, TaskSpec
from tui.config.load import apply_overrides, load_config
from tui.config.yamlload import ConfigError

REPO = Path(__file__).resolve().parents[2]

#: A minimal valid cluster section (lines 1-3), for tests about other sections.
CLUSTER = "cluster:\n  ps: [localhost:2222]\n  worker: [localhost:2223]\n"

ISSUE_EXAMPLE = """\
hosts:                      # how to reach machines; localhost needs no entry
  gpu1:
    address: 10.1.2.3       # default: the key itself
    port: 22
    user: train
    identity: ~/.ssh/id_ed25519
    known_hosts: ~/.ssh/known_hosts
    jump: bastion           # optional jump host (name of another hosts entry or user@host:port)
    python: /opt/tf/bin/python
    workdir: ~/tfdist
    env: {CUDA_VISIBLE_DEVICES: "0"}
cluster:
  ps: [localhost:2222]                      # host:port, as in tf.train.ClusterSpec
  worker: [localhost:2223, localhost:auto, {host: gpu1, port: 2222, gpus: 2}]
training:                  # the trainer's settings, same names as TrainingSettings fields
  model: mlp
  dataset: digits
  mode: async
  partitions: 1
  placement: greedy
  steps: 3000
  batch_size: 64
  learning_rate: 0.05
"""


def write(tmp_path: Path, text: str | bytes, name: str = "hosts.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> ClusterConfig:
    return load_config(write(tmp_path, text))


def fail(tmp_path: Path, text: str | bytes, line: int | None, column: int | None,
         fragment: str) -> ConfigError:
    """Load ``text``, expecting a ConfigError at line:column whose message has ``fragment``."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert fragment in error.message
    assert (error.line, error.column) == (line, column), str(error)
    assert error.path == str(path)
    return error


# --- Valid files ---------------------------------------------------------------------------


def test_issue_example_parses_into_dataclasses(tmp_path: Path) -> None:
    config = load(tmp_path, ISSUE_EXAMPLE)
    assert config.path == tmp_path / "hosts.yaml"
    assert config.hosts == {
        "gpu1": HostSpec(name="gpu1", address="10.1.2.3", port=22, user="train", identity="~/.ssh/id_ed25519",
                         known_hosts="~/.ssh/known_hosts", jump="bastion", python="/opt/tf/bin/python",
                         workdir="~/tfdist", env={"CUDA_VISIBLE_DEVICES": "0"}),
    }
    assert config.tasks == (
        TaskSpec(Job.PS, 0, "localhost", 2222),
        TaskSpec(Job.WORKER, 0, "localhost", 2223),
        TaskSpec(Job.WORKER, 1, "localhost", None),
        TaskSpec(Job.WORKER, 2, "gpu1", 2222, gpus=2),
    )
    assert config.training == TrainingSettings(model=Model.MLP, dataset=Dataset.DIGITS, mode=Mode.ASYNC,
                                               partitions=1, placement=PlacementStrategy.GREEDY, steps=3000,
                                               batch_size=64, learning_rate=0.05)
    assert config.run_dir == tmp_path.resolve() / "runs"
    assert config.restart == RestartPolicy(RestartMode.NEVER, 3, 1.0)
    assert config.restart_overrides == {}


def test_issue_example_helpers(tmp_path: Path) -> None:
    config = load(tmp_path, ISSUE_EXAMPLE)
    assert [t.name for t in config.ps_tasks] == ["ps0"]
    assert [t.name for t in config.worker_tasks] == ["worker0", "worker1", "worker2"]
    assert [t.is_chief for t in config.tasks] == [False, True, False, False]
    gpu_task = config.tasks[-1]
    assert config.host_of(gpu_task) is config.hosts["gpu1"]
    local = config.host_of(config.tasks[0])
    assert local == HostSpec(name="localhost", address="localhost")
    assert local.is_local
    assert not config.hosts["gpu1"].is_local


def test_default_hosts_yaml() -> None:
    config = load_config(REPO / "hosts.yaml")
    assert config.hosts == {}
    assert config.tasks == (
        TaskSpec(Job.PS, 0, "localhost", None),
        TaskSpec(Job.WORKER, 0, "localhost", None),
        TaskSpec(Job.WORKER, 1, "localhost", None),
    )
    assert config.training == TrainingSettings(model=Model.MLP, dataset=Dataset.DIGITS, mode=Mode.ASYNC,
                                               partitions=1, placement=PlacementStrategy.GREEDY, steps=2000,
                                               batch_size=64, learning_rate=0.05)
    assert config.run_dir == (REPO / "runs").resolve()
    assert config.restart_policy(Job.WORKER) == RestartPolicy()


def test_default_hosts_yaml_examples_are_valid_when_uncommented(tmp_path: Path) -> None:
    """The commented-out examples are meant to be uncommented by removing "# "; keep them valid."""
    lines = []
    for line in (REPO / "hosts.yaml").read_text(encoding="utf-8").splitlines():
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        body = stripped[2:] if stripped.startswith("# ") else None
        uncomment = body is not None and body.startswith(("gpu1:", "run_dir:", "restart:", "  "))
        lines.append(indent + body if uncomment and body is not None else line)
    config = load(tmp_path, "\n".join(lines) + "\n")
    assert config.hosts["gpu1"].address == "10.1.2.3"
    assert config.hosts["gpu1"].env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert config.restart.policy is RestartMode.ON_FAILURE
    assert config.restart_policy(Job.WORKER).max_restarts == 5


def test_minimal_file_uses_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, CLUSTER)
    assert config.hosts == {}
    assert config.training == TrainingSettings()
    assert config.restart == RestartPolicy()


def test_empty_sections_are_empty(tmp_path: Path) -> None:
    config = load(tmp_path, "hosts:\ntraining:\n" + CLUSTER)
    assert config.hosts == {}
    assert config.training == TrainingSettings()


def test_all_training_settings(tmp_path: Path) -> None:
    text = CLUSTER.replace("[localhost:2223]", "[localhost:2223, localhost:2224]") + dedent("""\
        training:
          model: cnn
          dataset: synthetic
          data_path: /data/x
          input_size: 32
          batch_size: 128
          learning_rate: 1e-3
          optimizer: adam
          steps: "500"
          mode: sync
          replicas_to_aggregate: 2
          partitions: 4
          placement: round_robin
          seed: 7
          checkpoint_dir: ckpt
          checkpoint_every: 50
          summary_dir: 2024-01-01
          log_every: 10
          eval_every: 0
          gpus: 2
          hidden_units: 64
        """)
    training = load(tmp_path, text).training
    assert training == TrainingSettings(
        model=Model.CNN, dataset=Dataset.SYNTHETIC, data_path="/data/x", input_size=32, batch_size=128,
        learning_rate=0.001, optimizer=Optimizer.ADAM, steps=500, mode=Mode.SYNC, replicas_to_aggregate=2,
        partitions=4, placement=PlacementStrategy.ROUND_ROBIN, seed=7, checkpoint_dir="ckpt",
        checkpoint_every=50, summary_dir="2024-01-01", log_every=10, eval_every=0, gpus=2, hidden_units=64)


def test_null_for_optional_setting_is_none(tmp_path: Path) -> None:
    assert load(tmp_path, CLUSTER + "training: {data_path: null}").training.data_path is None


def test_task_forms(tmp_path: Path) -> None:
    text = dedent("""\
        cluster:
          ps:
            - "[::1]:2222"
            - {host: 10.0.0.5, port: "auto"}
          worker:
            - {host: gpu2}
            - {host: "fe80::1%eth0", port: 2223, gpus: 0}
            - 127.0.0.1:2224
        """)
    assert load(tmp_path, text).tasks == (
        TaskSpec(Job.PS, 0, "::1", 2222),
        TaskSpec(Job.PS, 1, "10.0.0.5", None),
        TaskSpec(Job.WORKER, 0, "gpu2", None),
        TaskSpec(Job.WORKER, 1, "fe80::1%eth0", 2223, gpus=0),
        TaskSpec(Job.WORKER, 2, "127.0.0.1", 2224),
    )


def test_tasks_list_all_ps_then_all_workers(tmp_path: Path) -> None:
    text = "cluster:\n  worker: [a:1, b:1]\n  ps: [c:1, d:1]\n"
    assert [(t.name, t.host) for t in load(tmp_path, text).tasks] == [
        ("ps0", "c"), ("ps1", "d"), ("worker0", "a"), ("worker1", "b")]


def test_unlisted_hosts_are_reached_by_name(tmp_path: Path) -> None:
    config = load(tmp_path, "cluster:\n  ps: [127.0.0.1:1]\n  worker: [node7:1]\n")
    assert config.host_of(config.tasks[0]) == HostSpec(name="127.0.0.1", address="127.0.0.1")
    assert not config.host_of(config.tasks[0]).is_local
    assert config.host_of(config.tasks[1]).address == "node7"


def test_same_port_on_different_machines_is_fine(tmp_path: Path) -> None:
    config = load(tmp_path, "cluster:\n  ps: [a:2222, b:2222]\n  worker: [localhost:auto, localhost:auto]\n")
    assert len(config.tasks) == 4


def test_host_entry_defaults_and_env_values_as_written(tmp_path: Path) -> None:
    text = dedent("""\
        hosts:
          gpu2:
          gpu3:
            user: 1001
            env: {A: 0, B: yes, C: 1.50, D: ""}
          bastion: {address: "2001:db8::1", port: 2200}
          gpu4: {jump: "ops@bastion.example.com:2200,bastion"}
        """) + CLUSTER
    hosts = load(tmp_path, text).hosts
    assert hosts["gpu2"] == HostSpec(name="gpu2", address="gpu2")
    assert hosts["gpu3"].user == "1001"
    assert hosts["gpu3"].env == {"A": "0", "B": "yes", "C": "1.50", "D": ""}
    assert (hosts["bastion"].address, hosts["bastion"].port) == ("2001:db8::1", 2200)
    assert hosts["gpu4"].jump == "ops@bastion.example.com:2200,bastion"


def test_anchors_and_merge_keys(tmp_path: Path) -> None:
    text = dedent("""\
        hosts:
          gpu1: &gpu {user: train, python: /opt/tf/bin/python, port: 2200}
          gpu2:
            <<: *gpu
            port: 22
        """) + CLUSTER
    hosts = load(tmp_path, text).hosts
    assert hosts["gpu2"] == dataclasses.replace(hosts["gpu1"], name="gpu2", address="gpu2", port=22)


def test_run_dir(tmp_path: Path) -> None:
    assert load(tmp_path, CLUSTER + "run_dir: out/runs\n").run_dir == (tmp_path / "out" / "runs").resolve()
    assert load(tmp_path, CLUSTER + f"run_dir: {tmp_path / 'abs'}\n").run_dir == (tmp_path / "abs").resolve()
    assert load(tmp_path, CLUSTER + "run_dir: ~/r\n").run_dir == (Path.home() / "r").resolve()


def test_run_dir_is_relative_to_the_file_not_the_working_directory(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    path = write(tmp_path / "conf", CLUSTER)
    monkeypatch.chdir(tmp_path)
    config = load_config("conf/hosts.yaml")
    assert config.run_dir == (tmp_path / "conf" / "runs").resolve()
    assert config.path.is_absolute()
    assert config.path.samefile(path)


def test_restart_policy_and_overrides(tmp_path: Path) -> None:
    text = CLUSTER + dedent("""\
        restart:
          policy: on-failure
          max_restarts: 5
          backoff: 2
          ps: {policy: never}
          worker: {backoff: 0.5, window: 3600}
        """)
    config = load(tmp_path, text)
    assert config.restart == RestartPolicy(RestartMode.ON_FAILURE, 5, 2.0)
    assert config.restart_policy(Job.PS) == RestartPolicy(RestartMode.NEVER, 5, 2.0)
    assert config.restart_policy(Job.WORKER) == RestartPolicy(RestartMode.ON_FAILURE, 5, 0.5, 3600.0)


def test_restart_policy_without_overrides(tmp_path: Path) -> None:
    config = load(tmp_path, CLUSTER + "restart: {policy: on-failure}\n")
    assert config.restart_policy(Job.PS) == config.restart == RestartPolicy(RestartMode.ON_FAILURE)


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    assert len(load_config(write(tmp_path, b"\xef\xbb\xbf" + CLUSTER.encode())).tasks) == 2


def test_config_error_str() -> None:
    assert str(ConfigError("h.yaml", 3, 7, "bad")) == "h.yaml:3:7: bad"
    assert str(ConfigError("h.yaml", 3, None, "bad")) == "h.yaml:3: bad"
    assert str(ConfigError("h.yaml", None, None, "bad")) == "h.yaml: bad"


# --- File-level mistakes -------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "nope.yaml")
    assert caught.value.message == "file does not exist"
    assert (caught.value.line, caught.value.column) == (None, None)
    assert str(caught.value) == f"{tmp_path / 'nope.yaml'}: file does not exist"


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


#: One-line mistakes: (text, line, column, message fragment).
FILE_LEVEL_MISTAKES_ERRORS = [
    pytest.param("", 1, 1, "file is empty", id="empty_file"),
    pytest.param("# hosts\n- localhost:2222\n", 2, 1,
        "expected a mapping with hosts:, cluster: and training:", id="not_a_mapping_list"),
    pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", None, None, "not a text file", id="binary_garbage"),
    pytest.param("cluster:\n  ps: [a\x07:1]\n", 2, 9, "U+0007 is not allowed", id="control_character"),
    pytest.param("cluster: ps: [a:1]\n", 1, 12, "mapping values are not allowed here",
                 id="yaml_mapping_value_not_allowed"),
    pytest.param("cluster:\n  ps: *servers\n", 2, 7, "undefined alias", id="undefined_alias"),
    pytest.param("hosts:\n  gpu1:\n    user: a\n  \t  port: 22\n", 4, 3, "tab in indentation",
                 id="tab_after_spaces_in_indentation"),
    pytest.param(CLUSTER + "training:\n  steps: !secret 5\n", 5, 10, "unsupported YAML tag '!secret'",
                 id="unsupported_tag"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), FILE_LEVEL_MISTAKES_ERRORS)
def test_file_level_mistakes_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_only_comments_is_empty(tmp_path: Path) -> None:
    fail(tmp_path, "# nothing\n\n", 1, 1, "file is empty")

def test_not_yaml_plain_text(tmp_path: Path) -> None:
    fail(tmp_path, "Just some notes about the cluster.\n", 1, 1, "got 'Just some notes about the cluster.'")

def test_invalid_utf8(tmp_path: Path) -> None:
    fail(tmp_path, b"cluster:\n  ps: [h\xe9:1]\n", 2, 9, "not UTF-8 text (byte 0xe9)")

def test_yaml_syntax_error_uses_marks(tmp_path: Path) -> None:
    error = fail(tmp_path, "cluster:\n  ps: [localhost:2222\n  worker: [localhost:2223]\n", 3, 9,
                 "invalid YAML: expected ',' or ']', but got ':'")
    assert "flow sequence at line 2, column 7" in error.message

def test_two_documents(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "---\n" + CLUSTER, 4, 1, "expected a single document")

def test_tab_in_indentation(tmp_path: Path) -> None:
    error = fail(tmp_path, "cluster:\n  ps: [a:1]\n\tworker: [b:1]\n", 3, 1, "tab in indentation")
    assert str(error).endswith(":3:1: tab in indentation; indent with spaces only")

def test_tab_between_key_and_value(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\t{}\n", 1, 9, "tab character")

def test_bad_explicit_int(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  steps: !!int ten\n", 5, 10, "'ten' is not a valid !!int")


def test_deep_nesting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load(tmp_path, "cluster: " + "[" * 100_000 + "]" * 100_000)


# --- Keys ----------------------------------------------------------------------------------


#: One-line mistakes: (text, line, column, message fragment).
KEYS_ERRORS = [
    pytest.param("clustr:\n  ps: [a:1]\n", 1, 1,
        "unknown key 'clustr' in the top level; did you mean 'cluster'?", id="unknown_top_level_key"),
    pytest.param("hosts:\n  gpu1:\n    adress: 10.0.0.1\n" + CLUSTER, 3, 5,
        "unknown key 'adress' in hosts.gpu1; did you mean 'address'?", id="unknown_host_key"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n    - {host: b, gpu: 1}\n", 4, 17,
        "unknown key 'gpu' in cluster.worker[0]; did you mean 'gpus'?", id="unknown_task_key"),
    pytest.param(CLUSTER + "zzz: 1\n", 4, 1,
        "unknown key 'zzz' in the top level; expected one of: hosts, cluster, training, run_dir, restart",
                 id="unknown_key_without_close_match_lists_valid_keys"),
    pytest.param(CLUSTER + "training:\n  steps: 10\n  mode: sync\n  steps: 20\n", 7, 3,
        "duplicate key 'steps' in training (first at line 5, column 3)", id="duplicate_key"),
    pytest.param(CLUSTER + "training:\n  ? [a, b]\n  : 1\n", 5, 5, "expected a name as key, got a list",
                 id="non_text_key"),
    pytest.param("hosts:\n  gpu1:\n    <<: [1]\n" + CLUSTER, 3, 10, "'<<' merges a mapping, got '1'",
                 id="merge_of_non_mapping"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), KEYS_ERRORS)
def test_keys_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_unknown_training_key(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  mode: sync\n  stpes: 3\n", 6, 3,
         "unknown key 'stpes' in training; did you mean 'steps'?")

def test_unknown_cluster_key(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:1]\n  workers: [b:1]\n", 3, 3,
         "unknown key 'workers' in cluster; did you mean 'worker'?")

def test_unknown_restart_key(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "restart:\n  worker: {retries: 3}\n", 5, 12,
         "unknown key 'retries' in restart.worker; expected one of: policy, max_restarts, backoff")

def test_yaml_boolean_key_is_taken_as_written(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  on: 1\n", 5, 3, "unknown key 'on' in training")

def test_duplicate_top_level_key(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + CLUSTER, 4, 1, "duplicate key 'cluster' in the top level")

def test_null_key(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  ~: 1\n", 5, 3, "expected a name as key")

# --- Cluster ---------------------------------------------------------------------------------


#: One-line mistakes: (text, line, column, message fragment).
CLUSTER_ERRORS = [
    pytest.param("# c\ntraining: {steps: 5}\n", 2, 1, "missing key 'cluster'", id="missing_cluster"),
    pytest.param("cluster:\n", 1, 1, "cluster needs at least one ps task", id="empty_cluster"),
    pytest.param("cluster:\n  ps: []\n  worker: [b:1]\n", 2, 7, "cluster needs at least one ps task",
                 id="empty_ps_list"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n", 3, 3, "cluster needs at least one worker task",
                 id="worker_key_without_value"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker: [a:1, localhost]\n", 3, 17,
        "cluster.worker[1]: expected host:port or host:auto", id="task_without_port"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n    - b:65536\n", 4, 7, "port 65536 is out of range",
                 id="task_port_out_of_range"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n    - {host: b, port: 70000}\n", 4, 23,
        "cluster.worker[0].port: port 70000 is out of range", id="task_mapping_port_out_of_range"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n    - {port: 2}\n", 4, 7, "missing key 'host'",
                 id="task_mapping_without_host"),
    pytest.param("cluster:\n  ps: [a:1]\n  worker:\n    - [b, 1]\n", 4, 7,
        "cluster.worker[0]: expected text, got a list", id="task_entry_is_a_list"),
    pytest.param("cluster:\n  ps: ['::1:2222']\n  worker: [b:1]\n", 2, 8, "IPv6 address needs brackets",
                 id="ipv6_without_brackets"),
    pytest.param("cluster:\n  ps: [me@gpu1:1]\n  worker: [b:1]\n", 2, 8, "put the user in a hosts: entry",
                 id="user_in_task_host"),
    pytest.param("cluster:\n  ps: [localhost:2222]\n  worker: [127.0.0.1:2222]\n", 3, 12,
        "worker0 uses 127.0.0.1:2222, already taken by ps0 at line 2, column 8",
                 id="duplicate_port_on_loopback_aliases"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), CLUSTER_ERRORS)
def test_cluster_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_cluster_not_a_mapping(tmp_path: Path) -> None:
    fail(tmp_path, "cluster: [a:1, b:2]\n", 1, 10,
         "cluster: expected a mapping with ps: and worker: lists, got a list")

def test_no_ps(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  worker: [b:1]\n", 2, 3,
         "cluster needs at least one ps task, e.g. ps: [localhost:auto]")

def test_no_worker(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:1]\n", 2, 3, "cluster needs at least one worker task")

def test_tasks_not_a_list(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: localhost:2222\n  worker: [b:1]\n", 2, 7,
         "cluster.ps: expected a list of host:port tasks")

def test_task_port_not_a_number(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:http]\n  worker: [b:1]\n", 2, 8,
         "expected a port number from 1 to 65535 or auto, got 'http'")

def test_task_port_zero(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:0]\n  worker: [b:1]\n", 2, 8, "port 0 is out of range")

def test_task_mapping_port_boolean(tmp_path: Path) -> None:
    error = fail(tmp_path, "cluster:\n  ps: [a:1]\n  worker:\n    - {host: b, port: yes}\n", 4, 23,
                 "cluster.worker[0].port: expected a port number")
    assert "boolean" in error.message

def test_task_gpus_negative(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:1]\n  worker:\n    - {host: b, gpus: -1}\n", 4, 23,
         "cluster.worker[0].gpus: expected a whole number >= 0, got '-1'")

def test_task_entry_is_empty(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: [a:1]\n  worker:\n    -\n    - b:1\n", 4, 6, "expected text, got nothing")

def test_ipv6_unclosed_bracket(tmp_path: Path) -> None:
    fail(tmp_path, "cluster:\n  ps: ['[::1:2222']\n  worker: [b:1]\n", 2, 8, "expected [address]:port")

def test_duplicate_host_port(tmp_path: Path) -> None:
    error = fail(tmp_path,
                 "cluster:\n  ps: [localhost:2222]\n  worker:\n    - localhost:2223\n    - localhost:2222\n",
                 5, 7, "worker1 uses localhost:2222, already taken by ps0 at line 2, column 8")
    assert str(error).endswith(":5:7: worker1 uses localhost:2222, already taken by ps0 at line 2, column 8")

def test_duplicate_port_on_host_entry_address(tmp_path: Path) -> None:
    text = ("hosts:\n  gpu1: {address: 10.0.0.9}\n"
            "cluster:\n  ps: [10.0.0.9:1]\n  worker: [{host: gpu1, port: 1}]\n")
    fail(tmp_path, text, 5, 12, "worker0 uses gpu1:1, already taken by ps0 at line 4, column 8")


# --- Hosts -----------------------------------------------------------------------------------


#: One-line mistakes: (text, line, column, message fragment).
HOSTS_ERRORS = [
    pytest.param("hosts: [gpu1]\n" + CLUSTER, 1, 8, "hosts: expected a mapping of host names",
                 id="hosts_not_a_mapping"),
    pytest.param("hosts:\n  gpu 1: {}\n" + CLUSTER, 2, 3, "'gpu 1' is not a valid host name",
                 id="bad_host_name"),
    pytest.param("hosts:\n  gpu1:\n    port: 0\n" + CLUSTER, 3, 11,
        "hosts.gpu1.port: port 0 is out of range", id="host_port_out_of_range"),
    pytest.param("hosts:\n  gpu1:\n    port: auto\n" + CLUSTER, 3, 11, "got 'auto'",
                 id="host_port_auto_not_allowed"),
    pytest.param("hosts:\n  gpu1:\n    python: {path: x}\n" + CLUSTER, 3, 13,
        "hosts.gpu1.python: expected text, got a mapping", id="host_text_field_is_a_mapping"),
    pytest.param("hosts:\n  gpu1:\n    env:\n      PATHS: [/a, /b]\n" + CLUSTER, 4, 14,
        "hosts.gpu1.env.PATHS: expected a single value (text or a number), got a list",
                 id="env_value_is_a_list"),
    pytest.param("hosts:\n  gpu1:\n    env: {A: ~}\n" + CLUSTER, 3, 14, 'write "" for an empty one',
                 id="env_value_is_null"),
    pytest.param("hosts:\n  gpu1: {jump: 'me@bastion:99999'}\n" + CLUSTER, 2, 16,
        "hosts.gpu1.jump: port 99999 is out of range", id="jump_bad_port"),
    pytest.param("hosts:\n  gpu1: {jump: gpu1}\n" + CLUSTER, 2, 16, "jump hosts form a loop: gpu1 -> gpu1",
                 id="jump_to_itself"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), HOSTS_ERRORS)
def test_hosts_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_host_entry_not_a_mapping(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1: 10.0.0.1\n" + CLUSTER, 2, 9, "hosts.gpu1: expected a mapping of address:")

def test_bad_address(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1: {address: 'a b'}\n" + CLUSTER, 2, 19,
         "'a b' is not a host name or IP address")

def test_host_port_not_a_number(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1:\n    port: ssh\n" + CLUSTER, 3, 11,
         "hosts.gpu1.port: expected a port number from 1 to 65535, got 'ssh'")

def test_host_text_field_empty(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1:\n    user:\n" + CLUSTER, 3, 10,
         "hosts.gpu1.user: expected text, got nothing")

def test_env_not_a_mapping(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1:\n    env: [A=1]\n" + CLUSTER, 3, 10, "hosts.gpu1.env: expected a mapping")

def test_env_value_is_a_mapping(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1:\n    env: {A: {b: 1}}\n" + CLUSTER, 3, 14, "got a mapping")

def test_env_bad_name(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1:\n    env: {1A: x}\n" + CLUSTER, 3, 11,
         "'1A' is not a valid environment variable name")

def test_jump_bad_host(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  gpu1: {jump: 'a b'}\n" + CLUSTER, 2, 16,
         "expected a hosts entry or [user@]host[:port]")

def test_jump_loop(tmp_path: Path) -> None:
    fail(tmp_path, "hosts:\n  a: {jump: b}\n  b: {jump: a}\n" + CLUSTER, 2, 13,
         "jump hosts form a loop: a -> b -> a")


# --- Training ------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("mode", "fast", "sync, async"),
    ("placement", "random", "greedy, round_robin"),
    ("model", "resnet", "softmax, mlp, cnn, cifar_cnn, vgg19"),
    ("optimizer", "lbfgs", "sgd, rmsprop, adagrad, adam"),
    ("dataset", "imagenet", "digits, mnist, fashion_mnist, cifar10, synthetic"),
])
def test_bad_choice_lists_allowed_values(tmp_path: Path, key: str, value: str, allowed: str) -> None:
    fail(tmp_path, CLUSTER + f"training:\n  {key}: {value}\n", 5, 5 + len(key),
         f"training.{key}: expected one of {allowed}, got {value!r}")


#: One-line mistakes: (text, line, column, message fragment).
TRAINING_ERRORS = [
    pytest.param(CLUSTER + "training:\n  placement: round-robin\n", 5, 14, "did you mean 'round_robin'?",
                 id="bad_choice_suggests_nearest"),
    pytest.param(CLUSTER + "training:\n  model: 3\n", 5, 10, "expected one of softmax",
                 id="choice_given_a_number"),
    pytest.param(CLUSTER + "training:\n  batch_size: 6.5\n", 5, 15, "expected an integer, got 6.5",
                 id="setting_float_for_integer"),
    pytest.param(CLUSTER + "training:\n  steps: [1, 2]\n", 5, 10,
        "training.steps: expected a single value, got a list", id="setting_is_a_list"),
    pytest.param(CLUSTER + "training: fast\n", 4, 11, "training: expected a mapping of training settings",
                 id="training_not_a_mapping"),
    pytest.param(CLUSTER + "training:\n  learning_rate: -0.1\n", 5, 18,
        "training.learning_rate: must be > 0", id="negative_learning_rate"),
    pytest.param(CLUSTER + "training:\n  mode: sync\n  replicas_to_aggregate: 2\n", 6, 26,
        "training.replicas_to_aggregate: must be at most the number of workers (1), got 2",
                 id="replicas_to_aggregate_above_worker_count"),
    pytest.param(CLUSTER + "training:\n  gpus: 3\n", 5, 9,
        "training.batch_size: must be divisible by gpus (3)",
                 id="batch_size_not_divisible_by_gpus_points_at_gpus_when_batch_size_is_default"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), TRAINING_ERRORS)
def test_training_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_yaml_boolean_for_mode(tmp_path: Path) -> None:
    error = fail(tmp_path, CLUSTER + "training:\n  mode: on\n", 5, 9,
                 "training.mode: expected one of sync, async")
    assert "YAML reads an unquoted on as a boolean" in error.message

def test_setting_not_a_number(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  steps: lots\n", 5, 10,
         "training.steps: expected an integer, got 'lots'")

def test_setting_boolean_for_number(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  learning_rate: no\n", 5, 18,
         "expected a number, got False (YAML reads")

def test_setting_is_null(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  mode:\n", 5, 8, "training.mode: expected a value, got nothing; "
                                                         "remove the key to use the default (async)")

@pytest.mark.parametrize(("key", "value"), [
    ("steps", "0"), ("steps", "-5"), ("batch_size", "0"), ("partitions", "0"), ("partitions", "-1"),
    ("log_every", "0"), ("gpus", "0"), ("hidden_units", "-3"), ("checkpoint_every", "0"),
])
def test_non_positive_counts(tmp_path: Path, key: str, value: str) -> None:
    fail(tmp_path, CLUSTER + f"training:\n  mode: sync\n  {key}: {value}\n", 6, 5 + len(key),
         f"training.{key}: must be a positive integer, got {value}")

def test_negative_eval_every_and_seed(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  eval_every: -1\n", 5, 15, "training.eval_every: must be 0 (off)")
    fail(tmp_path, CLUSTER + "training:\n  seed: -1\n", 5, 9, "training.seed: must be >= 0")

def test_replicas_to_aggregate_zero(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  replicas_to_aggregate: 0\n", 5, 26,
         "must be a positive integer, got 0")

def test_batch_size_not_divisible_by_gpus_points_at_batch_size(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "training:\n  batch_size: 10\n  gpus: 3\n", 5, 15,
         "must be divisible by gpus (3)")


# --- run_dir and restart ------------------------------------------------------------------


#: One-line mistakes: (text, line, column, message fragment).
RUN_DIR_AND_RESTART_ERRORS = [
    pytest.param(CLUSTER + "run_dir: [a, b]\n", 4, 10, "run_dir: expected text, got a list",
                 id="run_dir_not_text"),
    pytest.param(CLUSTER + "restart:\n  policy: on_failure\n", 5, 11,
        "restart.policy: expected one of never, on-failure, got 'on_failure'; did you mean 'on-failure'?",
                 id="restart_bad_policy"),
    pytest.param(CLUSTER + "restart:\n  max_restarts: -1\n", 5, 17,
        "restart.max_restarts: expected a whole number >= 0, got '-1'", id="restart_negative_max_restarts"),
    pytest.param(CLUSTER + "restart: {backoff: soon}\n", 4, 20, "expected a number >= 0, got 'soon'",
                 id="restart_backoff_not_a_number"),
    pytest.param(CLUSTER + "run_dir: !!binary aGVsbG8=\n", 4, 10, "unsupported YAML tag '!!binary'",
                 id="binary_tag"),
    pytest.param(CLUSTER + "restart: {ps: never}\n", 4, 15, "restart.ps: expected a mapping",
                 id="restart_override_not_a_mapping"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), RUN_DIR_AND_RESTART_ERRORS)
def test_run_dir_and_restart_errors_are_located(tmp_path: Path, text: str | bytes, line: int | None,
                                 column: int | None, fragment: str) -> None:
    fail(tmp_path, text, line, column, fragment)


def test_run_dir_empty(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "run_dir: ''\n", 4, 10, "run_dir: expected text")

def test_restart_policy_yaml_boolean(tmp_path: Path) -> None:
    error = fail(tmp_path, CLUSTER + "restart: {policy: no}\n", 4, 19,
                 "expected one of never, on-failure, got 'no'")
    assert "boolean" in error.message

def test_restart_negative_backoff(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "restart:\n  worker:\n    backoff: -0.5\n", 6, 14,
         "restart.worker.backoff: expected a number >= 0, got '-0.5'")

def test_restart_backoff_infinite(tmp_path: Path) -> None:
    fail(tmp_path, CLUSTER + "restart: {backoff: .inf}\n", 4, 20, "expected a number >= 0, got '.inf'")

@pytest.mark.parametrize(("text", "line", "column", "where"), [
    (CLUSTER + 'run_dir: "runs\\0x"\n', 4, 10, "run_dir"),
    (CLUSTER + 'training: {data_path: "a\\0"}\n', 4, 23, "training.data_path"),
    ('hosts: {g: {env: {A: "\\0"}}}\n' + CLUSTER, 1, 22, "hosts.g.env.A"),
    ('hosts: {g: {python: "py\\0"}}\n' + CLUSTER, 1, 21, "hosts.g.python"),
])
def test_nul_character_in_text(tmp_path: Path, text: str, line: int, column: int, where: str) -> None:
    fail(tmp_path, text, line, column, f"{where}: must not contain a NUL character")

# --- apply_overrides -----------------------------------------------------------------------


def test_apply_overrides_changes_training_only(tmp_path: Path) -> None:
    config = load(tmp_path, ISSUE_EXAMPLE)
    changed = apply_overrides(config, mode="sync", partitions="4", placement="round_robin", steps=10)
    assert changed.training == dataclasses.replace(config.training, mode=Mode.SYNC, partitions=4,
                                                   placement=PlacementStrategy.ROUND_ROBIN, steps=10)
    assert dataclasses.replace(changed, training=config.training) == config
    assert config.training.mode is Mode.ASYNC  # the original is untouched


def test_fuse_is_a_yes_or_no_in_the_file_and_on_the_command_line(tmp_path: Path) -> None:
    from tui.cli import build_parser

    base = "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n"
    assert load_config(write(tmp_path, base)).training.fuse is True
    config = load_config(write(tmp_path, base + "training: {fuse: false}\n"))
    assert config.training.fuse is False
    assert "--fuse false" in " ".join(config.training.to_argv())
    with pytest.raises(ConfigError, match=r"training.fuse: expected true or false, got 'sometimes'"):
        load_config(write(tmp_path, base + "training: {fuse: sometimes}\n"))
    assert apply_overrides(config, fuse=True).training.fuse is True
    assert build_parser().parse_args(["h.yaml", "--no-fuse"]).fuse is False
    assert build_parser().parse_args(["h.yaml", "--fuse"]).fuse is True
    assert build_parser().parse_args(["h.yaml"]).fuse is None  # not given: the file's


def test_apply_overrides_none_means_not_given(tmp_path: Path) -> None:
    config = load(tmp_path, ISSUE_EXAMPLE)
    assert apply_overrides(config, mode=None, steps=None) == config


@pytest.mark.parametrize(("changes", "message"), [
    ({"mode": "fast"}, "--mode: expected one of sync, async, got 'fast'"),
    ({"steps": "many"}, "--steps: expected an integer, got 'many'"),
    ({"partitions": "0"}, "--partitions: must be a positive integer, got 0"),
    ({"replicas_to_aggregate": 9},
     "--replicas-to-aggregate: must be at most the number of workers (3), got 9"),
    ({"stpes": 5}, "unknown setting --stpes; did you mean 'steps'?"),
])
def test_apply_overrides_rejects_bad_values(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    config = load(tmp_path, ISSUE_EXAMPLE)
    with pytest.raises(ConfigError) as caught:
        apply_overrides(config, **changes)
    assert caught.value.args == ("command line", None, None, message)


# --- Nothing but ConfigError, whatever the input -------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def load_or_config_error(path: Path) -> None:
    try:
        config = load_config(path)
    except ConfigError as error:
        assert error.message
        assert error.line is None or error.line >= 1
        assert error.column is None or error.column >= 1
    else:
        assert config.ps_tasks
        assert config.worker_tasks


@FUZZ
@given(st.text())
def test_any_text_loads_or_raises_config_error(tmp_path: Path, text: str) -> None:
    load_or_config_error(write(tmp_path, text))


@FUZZ
@given(st.binary())
def test_any_bytes_load_or_raise_config_error(tmp_path: Path, data: bytes) -> None:
    load_or_config_error(write(tmp_path, data))


@FUZZ
@given(st.text(alphabet="abc:[]{}-#&*!|>'\"\t\n ,?<.@%0123456789~", max_size=80))
def test_yaml_punctuation_loads_or_raises_config_error(tmp_path: Path, text: str) -> None:
    load_or_config_error(write(tmp_path, text))


SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20)
           | st.sampled_from(["auto", "localhost:2222", "localhost:auto", "[::1]:1", "on", "sync", "mlp",
                              "on-failure", "0", "-1", "65536", "gpu1", "a:b:c", "a\0b", "~/x"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10) | SCALARS, inner, max_size=4), max_leaves=20)


@FUZZ
@given(VALUES)
def test_any_structure_loads_or_raises_config_error(tmp_path: Path, value: object) -> None:
    load_or_config_error(write(tmp_path, yaml.safe_dump(value)))


TASKS = st.lists(st.sampled_from(["localhost:auto", "localhost:2222", "gpu1:2222", "10.0.0.1:1", "[::1]:9"])
                 | st.fixed_dictionaries({"host": st.sampled_from(["gpu1", "localhost", "x y"])},
                                         optional={"port": VALUES, "gpus": VALUES, "extra": VALUES})
                 | VALUES, max_size=4)
HOST_KEYS = st.sampled_from(["address", "port", "user", "jump", "env", "python", "workdir", "bogus"])
SCHEMA_SHAPED = st.fixed_dictionaries({}, optional={
    "cluster": st.fixed_dictionaries({}, optional={"ps": TASKS, "worker": TASKS, "chief": VALUES}) | VALUES,
    "hosts": st.dictionaries(st.sampled_from(["gpu1", "bastion", "bad name"]),
                             st.dictionaries(HOST_KEYS, VALUES, max_size=4) | VALUES, max_size=3),
    "training": st.dictionaries(st.sampled_from([*FIELD_NAMES, "stpes"]), VALUES, max_size=6) | VALUES,
    "restart": st.dictionaries(st.sampled_from(["policy", "max_restarts", "backoff", "ps", "worker", "x"]),
                               VALUES, max_size=4) | VALUES,
    "run_dir": VALUES,
})


@FUZZ
@given(SCHEMA_SHAPED)
def test_schema_shaped_structure_loads_or_raises_config_error(tmp_path: Path, value: object) -> None:
    load_or_config_error(write(tmp_path, yaml.safe_dump(value)))


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELD_NAMES), SCALARS, max_size=4))
def test_apply_overrides_raises_only_config_error(changes: dict[str, object]) -> None:
    config = load_config(REPO / "hosts.yaml")
    try:
        changed = apply_overrides(config, **changes)
    except ConfigError as error:
        assert error.path == "command line"
    else:
        assert not changed.training.problems(len(changed.worker_tasks))
        assert not math.isnan(changed.training.learning_rate)
