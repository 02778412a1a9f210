"""Hostile hosts.yaml files: merge-key bombs, long merge chains, huge or deep files, and
values that cannot be shown or used as they are. Each is refused (or loaded) quickly, with
little memory, as a located ConfigError; messages stay one short, escaped line."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer.settings import shown
from tui import cli
from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.config.yamlload import MAX_FILE_BYTES, MAX_MERGE_DEPTH, MAX_NODES, ConfigError

#: Refusals take about 0.3 s of CPU; the bound is on this process's CPU time, not the wall
#: clock, so a busy machine cannot fail it, and it still catches what it guards against (the
#: bomb took half an hour, the chain and the huge file minutes).
TIME_LIMIT = 2.0
#: Peak Python allocations while loading; the 50 MB file used to take 2.4 GB.
MEMORY_LIMIT = 30_000_000
CLUSTER = "cluster:\n  ps: [localhost:2222]\n  worker: [localhost:2223]\n"


def load_bounded(path: Path | str) -> ClusterConfig:
    """load_config(path), asserting that it takes under TIME_LIMIT CPU seconds and (in a second
    run, since tracing allocations slows Python several-fold) under MEMORY_LIMIT bytes."""
    start = time.process_time()
    try:
        return load_config(path)
    finally:
        elapsed = time.process_time() - start
        assert elapsed < TIME_LIMIT, f"took {elapsed:.2f} s of CPU"
        tracemalloc.start()
        try:
            load_config(path)
        except ConfigError:
            pass
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < MEMORY_LIMIT, f"peak {peak / 1e6:.1f} MB"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def refused(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_bounded(write(tmp_path, text))
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    return caught.value


def merge_bomb(levels: int, fan: int = 10) -> str:
    """The reviewer's bomb: each level merges the level below ``fan`` times, every level
    anchored where it is first used, so the file grows by ~60 bytes a level while a naive
    expansion grows ``fan``-fold."""
    node = "&x0 {ps: [localhost:2222], worker: [localhost:2223]}"
    for level in range(1, levels + 1):
        node = f"&x{level} {{<<: [{node}{f', *x{level - 1}' * (fan - 1)}]}}"
    return f"cluster: {node}\n"


def test_the_646_byte_merge_bomb_loads_at_once(tmp_path: Path) -> None:
    text = merge_bomb(10)
    assert len(text) < 800
    config = load_bounded(write(tmp_path, text))
    assert [t.name for t in config.tasks] == ["ps0", "worker0"]


def test_a_merge_bomb_with_a_mistake_is_located(tmp_path: Path) -> None:
    error = refused(tmp_path, merge_bomb(10).replace("ps:", "pss:"))
    assert error.line == 1 and error.column is not None
    assert "unknown key 'pss' in cluster; did you mean 'ps'?" in error.message


def test_a_long_merge_chain_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """300 mappings each merging the one before: training: is walked after cluster:, so the
    cluster's merge meets the whole chain unexpanded (this was a RecursionError, exit 1)."""
    chain = "".join(f"  c{i}: &c{i} {{<<: *c{i - 1}}}\n" for i in range(1, 300))
    text = f"training:\n  c0: &c0 {{steps: 1}}\n{chain}cluster:\n  <<: *c299\n"
    error = refused(tmp_path, text)
    assert f"merge keys ('<<') nested more than {MAX_MERGE_DEPTH} deep" in error.message
    assert error.line is not None and error.column is not None


def test_too_many_values(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER + "training: [" + "1, " * (2 * MAX_NODES) + "]\n")
    assert f"more than {MAX_NODES} values" in error.message
    assert error.line == 4 and error.column is not None and error.column > 3 * (MAX_NODES - 10)


def test_aliases_count_toward_the_budget(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER + "training: [&a 1" + ", *a" * (2 * MAX_NODES) + "]\n")
    assert f"more than {MAX_NODES} values" in error.message


def test_deep_nesting_is_located(tmp_path: Path) -> None:
    error = refused(tmp_path, "cluster: " + "[" * 5000 + "]" * 5000)
    assert "nested more than" in error.message
    assert error.line == 1 and error.column is not None


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    text = CLUSTER + "training:\n" + "  # padding\n" * (MAX_FILE_BYTES // 12 + 1)
    error = refused(tmp_path, text)
    assert "is larger than 128 KiB" in error.message and error.line is None


def test_an_endless_file_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        load_bounded("/dev/zero")
    assert "is larger than" in caught.value.message


def test_cli_exits_2_for_a_merge_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chain = "".join(f"  c{i}: &c{i} {{<<: *c{i - 1}}}\n" for i in range(1, 500))
    hosts = write(tmp_path, f"training:\n  c0: &c0 {{steps: 1}}\n{chain}cluster:\n  <<: *c499\n")
    assert cli.main([str(hosts), "--no-ui"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {hosts}:482:16: ") and "Traceback" not in err


# --- Values in messages and values that cannot be used -----------------------------------


def test_shown_escapes_and_shortens() -> None:
    assert shown("\x1b[31mred\nline") == r"'\x1b[31mred\nline'"
    assert shown("\ud800") == r"'\ud800'"
    assert shown("\u202e") == r"'\u202e'"  # right-to-left override
    long = shown("x" * 100_000)
    assert long.endswith("... (100000 characters)") and len(long) < 100
    assert shown(70000) == "70000"


def test_a_long_value_is_shortened_in_the_message(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER + f"training:\n  model: {'m' * 10_000}\n")
    assert len(str(error)) < 400 and "(10000 characters)" in error.message
    assert (error.line, error.column) == (5, 10)


def test_a_long_key_is_shortened_in_the_message(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER + f"{'k' * 1000}: 1\n")
    assert len(str(error)) < 400 and (error.line, error.column) == (4, 1)
    assert "unknown key 'kkkk" in error.message and "(1000 characters)" in error.message


def test_a_newline_in_a_value_does_not_split_the_message(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER + '"a\\nb\\e[2J": 1\n')
    assert r"unknown key 'a\nb\x1b[2J'" in error.message and (error.line, error.column) == (4, 1)


@pytest.mark.parametrize("key, value, expected", [
    ("run_dir", r'"runs/\e[31mred"', "run_dir: must not contain the control character U+001B"),
    ("run_dir", r'"runs/\ud800"', "run_dir: must not contain a lone surrogate U+D800"),
    ("hosts", r'{gpu1: {env: {A: "\ud800"}}}', "hosts.gpu1.env.A: must not contain a lone surrogate"),
    ("hosts", r'{gpu1: {env: {A: "x\ny"}}}', "hosts.gpu1.env.A: must not contain the control character"),
    ("hosts", r'{gpu1: {python: "py\rthon"}}', "hosts.gpu1.python: must not contain the control character"),
    ("training", r'{checkpoint_dir: "\ud800"}', "training.checkpoint_dir: must not contain a lone surrogate"),
])
def test_unusable_characters_are_refused_where_written(tmp_path: Path, key: str, value: str,
                                                       expected: str) -> None:
    error = refused(tmp_path, f"{CLUSTER}{key}: {value}\n")
    assert expected in error.message and error.line == 4


def test_a_tab_in_an_env_value_is_fine(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, CLUSTER + 'hosts: {gpu1: {env: {A: "x\\ty"}}}\n'))
    assert config.hosts["gpu1"].env == {"A": "x\ty"}


# --- Fuzzing with anchors, aliases and merge keys ------------------------------------------

KEYS = st.sampled_from(["ps", "worker", "steps", "model", "gpu1", "address", "env", "A", "policy"])
LEAVES = st.sampled_from(["localhost:auto", "1", "mlp", '"\\ud800"', "[localhost:1]", "{}", "~", "on"])


@st.composite
def anchored_yaml(draw: st.DrawFn) -> str:
    """A file whose top-level sections are built from anchored mappings that merge and
    alias each other in any combination (anchors are defined before use, as YAML requires)."""
    defined: list[str] = []
    lines = []
    for index in range(draw(st.integers(1, 12))):
        parts = []
        if defined:
            merged = draw(st.lists(st.sampled_from(defined), max_size=6))
            if merged:
                parts.append(f"<<: [{', '.join('*' + a for a in merged)}]")
            for _ in range(draw(st.integers(0, 2))):
                parts.append(f"{draw(KEYS)}{index}: *{draw(st.sampled_from(defined))}")
        for _ in range(draw(st.integers(0, 3))):
            parts.append(f"{draw(KEYS)}: {draw(LEAVES)}")
        name = f"a{index}"
        lines.append(f"  k{index}: &{name} {{{', '.join(parts)}}}")
        defined.append(name)
    section = draw(st.sampled_from(["training", "hosts", "restart"]))
    uses = draw(st.lists(st.sampled_from(defined), min_size=1, max_size=4))
    target = draw(st.sampled_from(["cluster", "hosts", "training", "restart"]))
    return (f"{section}:\n" + "\n".join(lines) + f"\n{target}:\n  <<: [{', '.join('*' + a for a in uses)}]\n"
            + ("" if target == "cluster" else CLUSTER))


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(anchored_yaml())
def test_aliases_and_merges_load_or_raise_config_error_on_a_budget(tmp_path: Path, text: str) -> None:
    try:
        load_bounded(write(tmp_path, text))
    except ConfigError as error:
        assert error.message and "\n" not in str(error)
