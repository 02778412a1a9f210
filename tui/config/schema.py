"""The JSON Schema of hosts.yaml, for editors (the YAML language server completes keys and
flags mistakes while the file is written). It is made from the loader's own tables
(:mod:`.keys` for every section, :mod:`trainer.settings` for training:), so a key the loader
accepts is in it and a key it refuses is not. ``hosts.schema.json`` beside this module is
the copy shipped in the package (``tfdist-tui schema`` prints it); ``python -m
tui.config.schema > tui/config/hosts.schema.json`` writes it again after a key changes, and
tests/config/test_schema.py fails until it is."""

from __future__ import annotations

import argparse
import json
import sys
from enum import Enum
from importlib import resources
from typing import Any

from trainer.settings import FIELD_TYPES, TrainingSettings
from tui.common.exit_codes import ExitCode
from tui.config import keys
from tui.config.keys import Shape, Value
from tui.config.slurm import NOT_FOR_SLURM

#: The file's name in the package, and the line that points the YAML language server at it.
FILE_NAME = "hosts.schema.json"
MODELINE = "# yaml-language-server: $schema="

Schema = dict[str, Any]

_TEXT: Schema = {"anyOf": [{"type": "string", "minLength": 1}, {"type": ["number", "boolean"]}]}
_PORT: Schema = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 65535},
                           {"type": "string", "pattern": "^[0-9]+$"}]}
_HOST_NAME = "^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$"
_ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]*$"
#: host:port, host:auto or [ipv6]:port.
_TASK_TEXT = r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]+|auto)$"
_SCALAR: Schema = {"type": ["string", "number", "boolean"]}
#: The loader reads a key with nothing under it (null) as an empty mapping or list.
_MAPPING = ["object", "null"]
_LIST = ["array", "null"]


def value_schema(value: Value) -> Schema:
    """The schema of one key's value, with its help as the description."""
    shapes: dict[Shape, Schema] = {
        Shape.TEXT: _TEXT,
        Shape.INTEGER: {"type": "integer"},
        Shape.NUMBER: {"type": "number"},
        Shape.BOOLEAN: {"type": "boolean"},
        Shape.CHOICE: {"enum": list(value.choices)},
        Shape.PORT: _PORT,
        Shape.PORT_OR_AUTO: {"anyOf": [_PORT, {"const": "auto"}]},
        Shape.TEXT_LIST: {"type": _LIST, "items": _TEXT},
        Shape.ENV: {"type": _MAPPING, "propertyNames": {"pattern": _ENV_NAME},
                    "additionalProperties": _SCALAR},
        Shape.COMMAND: {"anyOf": [{"type": "string", "minLength": 1},
                                  {"type": _LIST, "minItems": 1, "items": _SCALAR}]},
        Shape.SECTION: {"type": _MAPPING},
    }
    schema = dict(shapes[value.shape])
    if value.minimum is not None:
        schema["minimum"] = value.minimum
    return {"description": value.help, **schema}


def section(table: dict[str, Value], **extra: Any) -> Schema:
    """A mapping of exactly ``table``'s keys (unless ``extra`` says otherwise)."""
    return {"type": _MAPPING, "properties": {k: value_schema(v) for k, v in table.items()},
            "additionalProperties": False, **extra}


def _forbids(names: tuple[str, ...]) -> Schema:
    return {"not": {"anyOf": [{"required": [name]} for name in names]}}


def _host() -> Schema:
    slurm = {"properties": {"kind": {"const": "slurm"}}, "required": ["kind"]}
    return section({**keys.HOST, **keys.SLURM_HOST},
                   allOf=[{"if": slurm, "then": _forbids(NOT_FOR_SLURM),
                           "else": _forbids(tuple(keys.SLURM_HOST))}])


def _training_setting(name: str) -> Schema:
    kind = FIELD_TYPES[name]
    schema: Schema
    if isinstance(kind, type) and issubclass(kind, Enum):
        schema = {"enum": [member.value for member in kind]}
    elif kind is bool:
        schema = {"type": "boolean"}
    elif kind is int:
        schema = {"type": "integer"}
    elif kind is float:
        schema = {"type": "number"}
    else:
        schema = _TEXT
    default = getattr(TrainingSettings(), name)
    if default is None:
        return {"anyOf": [schema, {"type": "null"}]}
    return {**schema, "default": getattr(default, "value", default)}


def _cluster() -> Schema:
    task = {"anyOf": [{"type": "string", "pattern": _TASK_TEXT},
                      section(keys.TASK, required=["host"])]}
    jobs: dict[str, Schema] = {job: {"type": _LIST, "items": task} for job in keys.JOBS}
    jobs["ps"].update(type="array", minItems=1)
    return {"type": "object", "description": keys.TOP["cluster"].help, "properties": jobs,
            "additionalProperties": False, "required": ["ps"],
            # Workers may be left out only when a chief coordinates (a TF2 program).
            "if": {"not": {"required": ["chief"]}},
            "then": {"required": ["worker"], "properties": {"worker": {"type": "array", "minItems": 1}}}}


def hosts_schema() -> Schema:
    """The whole schema (JSON Schema draft-07, which every YAML language server reads)."""
    policy = section(keys.POLICY)
    builtin_training = section({}, properties={name: _training_setting(name) for name in FIELD_TYPES})
    free_training = {"type": _MAPPING, "additionalProperties": _SCALAR}
    top = {
        "hosts": {"type": _MAPPING, "description": keys.TOP["hosts"].help,
                  "propertyNames": {"pattern": _HOST_NAME}, "additionalProperties": _host()},
        "cluster": _cluster(),
        "training": {"description": keys.TOP["training"].help, "type": _MAPPING},
        "run_dir": value_schema(keys.TOP["run_dir"]),
        "restart": section(keys.POLICY, description=keys.TOP["restart"].help,
                           properties={**policy["properties"], **{job: policy for job in keys.JOBS}}),
        "program": section(keys.PROGRAM, description=keys.TOP["program"].help, required=["command"]),
        # Besides its own keys, resources: names jobs and tasks (ps, worker0, ...).
        "resources": section(keys.RESOURCES, description=keys.TOP["resources"].help,
                             additionalProperties=section(keys.RESOURCE_OVERRIDE)),
        "network": section(keys.NETWORK, description=keys.TOP["network"].help),
    }
    assert top.keys() == keys.TOP.keys()
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "tfdist-tui hosts.yaml",
        "description": "The cluster tfdist-tui starts: its hosts, tasks and training.",
        "type": "object", "properties": top, "additionalProperties": False, "required": ["cluster"],
        # With a program, training: holds free values for its placeholders and the cluster may
        # have a chief and an evaluator; without one, training: is the built-in trainer's.
        "if": {"required": ["program"]},
        "then": {"properties": {"training": free_training}},
        "else": {"properties": {"training": builtin_training,
                                "cluster": {"properties": {"chief": False, "evaluator": False}}}},
    }


def schema_text() -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(hosts_schema(), indent=2) + "\n"


def shipped_text() -> str:
    """The copy shipped in the package."""
    return resources.files("tui.config").joinpath(FILE_NAME).read_text(encoding="utf-8")


def schema_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="tfdist-tui schema",
        description="Print the JSON Schema of hosts.yaml. Save it next to your hosts.yaml and "
                    f"make its first line '{MODELINE}hosts.schema.json': editors that use the "
                    "YAML language server (VS Code's YAML extension, Neovim, Helix, ...) then "
                    "complete its keys and flag mistakes as you type.")


def schema_main(argv: list[str]) -> int:
    """``tfdist-tui schema``; returns the exit code."""
    try:
        schema_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed usage or help already
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    sys.stdout.write(shipped_text())
    return ExitCode.OK


if __name__ == "__main__":
    sys.stdout.write(schema_text())
