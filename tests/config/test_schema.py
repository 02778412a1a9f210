"""tui.config.schema: the JSON Schema editors use is made from the loader's own key tables,
knows every key the loader accepts, accepts every hosts.yaml of the repository, rejects the
loader's bad-input fixtures it can judge, and is the copy shipped and printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.config import test_load as loader_fixtures
from tests.support.clirun import REPO
from trainer.settings import FIELD_NAMES
from tui.config import keys, network, program, resources, slurm
from tui.config import load as loader
from tui.config.cluster import HostKind, Job, RestartMode
from tui.config.load import load_config
from tui.config.schema import FILE_NAME, MODELINE, hosts_schema, schema_text
from tui.config.yamlload import ConfigError

VALIDATOR = jsonschema.Draft7Validator(hosts_schema())

#: The loader's mistakes a schema cannot see, by a fragment of the loader's message: a
#: repeated key (gone once YAML is parsed), what two places say together, a range inside a
#: host:port text, a loop of jump hosts, and the trainer's cross-field checks.
BEYOND_A_SCHEMA = (
    "duplicate key", "already taken by", "port 65536 is out of range", "port 99999 is out of range",
    "form a loop", "learning_rate: must be > 0", "at most the number of workers", "divisible by gpus",
)


def schema_errors(text: str) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(yaml.safe_load(text))]


def repository_hosts_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*hosts*.yaml"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / name for name in names]


def test_the_schema_is_valid_draft_7_and_the_shipped_copy_is_current() -> None:
    jsonschema.Draft7Validator.check_schema(hosts_schema())
    shipped = (REPO / "tui" / "config" / FILE_NAME).read_text()
    assert shipped == schema_text(), "run: python -m tui.config.schema > tui/config/hosts.schema.json"


def test_every_key_the_loader_checks_is_in_the_schema() -> None:
    schema = hosts_schema()
    top = schema["properties"]
    host = top["hosts"]["additionalProperties"]["properties"]
    task = top["cluster"]["properties"]["ps"]["items"]["anyOf"][1]["properties"]
    builtin_training = schema["else"]["properties"]["training"]["properties"]
    restart = top["restart"]["properties"]
    override = top["resources"]["additionalProperties"]["properties"]
    expected = {
        "top": (loader._TOP_KEYS, top),
        "hosts entry": ((*loader._HOST_KEYS, *slurm.KEYS), host),
        "task": (loader._TASK_KEYS, task),
        "cluster": (loader._JOB_KEYS, top["cluster"]["properties"]),
        "restart": (loader._RESTART_KEYS, restart),
        "training": (FIELD_NAMES, builtin_training),
        "program": (program.PROGRAM_KEYS, top["program"]["properties"]),
        "network": (network.KEYS, top["network"]["properties"]),
        "resources": (resources._TOP_KEYS, top["resources"]["properties"]),
        "resources override": (resources.OVERRIDE_KEYS, override),
    }
    for where, (accepted, properties) in expected.items():
        assert set(accepted) == set(properties), where
    # Each of these tables hands the schema and the loader the same choices.
    assert keys.HOST["kind"].choices == tuple(k.value for k in HostKind)
    assert keys.POLICY["policy"].choices == tuple(m.value for m in RestartMode)
    assert keys.RESOURCES["threads"].choices == tuple(m.value for m in resources.ThreadsMode)
    assert tuple(job.value for job in Job) == keys.JOBS


def test_every_hosts_yaml_of_the_repository_names_the_schema_and_passes_it() -> None:
    files = repository_hosts_files()
    assert len(files) >= 7
    for path in files:
        first = path.read_text().splitlines()[0]
        assert first.startswith(MODELINE), path
        # The path the line gives (relative to the file) is the shipped schema.
        target = (path.parent / first.removeprefix(MODELINE)).resolve()
        assert target == REPO / "tui" / "config" / FILE_NAME, path
        load_config(path)  # the loader takes the comment line as any comment
        assert schema_errors(path.read_text()) == [], path


def test_the_loaders_valid_examples_pass_the_schema() -> None:
    for text in (loader_fixtures.ISSUE_EXAMPLE, loader_fixtures.CLUSTER):
        assert schema_errors(text) == []


def _bad_inputs() -> list[tuple[str | bytes, str]]:
    tables = ("FILE_LEVEL_MISTAKES_ERRORS", "KEYS_ERRORS", "CLUSTER_ERRORS", "HOSTS_ERRORS",
              "TRAINING_ERRORS", "RUN_DIR_AND_RESTART_ERRORS")
    rows: list[tuple[str | bytes, str]] = []
    for table in tables:
        for row in getattr(loader_fixtures, table):
            text, *_, fragment = row.values if hasattr(row, "values") else row
            rows.append((text, fragment))
    return rows


@pytest.mark.parametrize(("text", "fragment"), _bad_inputs())
def test_the_schema_rejects_what_the_loader_rejects(tmp_path: Path, text: str | bytes,
                                                    fragment: str) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError):
        load_config(path)
    try:
        document = yaml.safe_load(text)
    except (yaml.YAMLError, UnicodeDecodeError):
        return  # not YAML text at all: an editor flags it without a schema
    if any(known in fragment for known in BEYOND_A_SCHEMA):
        pytest.skip("a mistake no JSON Schema can express")
    assert not isinstance(document, dict) or list(VALIDATOR.iter_errors(document)), fragment


@pytest.mark.parametrize(("text", "where"), [
    (f"{loader_fixtures.CLUSTER}trainig: {{steps: 5}}\n", "trainig"),
    (f"{loader_fixtures.CLUSTER}hosts: {{h: {{adress: x}}}}\n", "adress"),
    (f"{loader_fixtures.CLUSTER}hosts: {{h: {{partition: debug}}}}\n", "partition"),
    (f"{loader_fixtures.CLUSTER}hosts: {{h: {{kind: slurm, user: me}}}}\n", "user"),
    (f"{loader_fixtures.CLUSTER}training: {{mode: fast}}\n", "fast"),
    ("cluster: {ps: [localhost:auto], chief: [localhost:auto]}\n", "chief"),
    (f"{loader_fixtures.CLUSTER}restart: {{worker: {{policy: always}}}}\n", "always"),
    (f"{loader_fixtures.CLUSTER}resources: {{ps: {{cores: 0}}}}\n", "0"),
])
def test_typos_an_editor_flags_are_errors_for_the_loader_too(tmp_path: Path, text: str, where: str) -> None:
    assert schema_errors(text), text
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=where):
        load_config(path)


def test_tfdist_tui_schema_prints_the_shipped_schema() -> None:
    result = subprocess.run([sys.executable, "-m", "tui", "schema"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == hosts_schema()
