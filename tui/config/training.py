"""One ``training:`` setting of hosts.yaml read from its node: converted by
:mod:`trainer.settings` (so flags and file agree) and located when it is wrong. Shared by the
built-in trainer's section (:mod:`.load`) and a program's driven settings (:mod:`.program`)."""

from __future__ import annotations

from yaml.nodes import Node

from trainer.settings import FIELD_TYPES, TrainingSettings, choices, convert
from tui.config.yamlload import NULL_TAG, NodeReader, bool_hint, did_you_mean


def training_setting(reader: NodeReader, name: str, node: Node) -> object:
    """One training setting, converted by trainer.settings so flags and file agree."""
    where = f"training.{name}"
    scalar = reader.scalar(node, where, "a single value")
    default = getattr(TrainingSettings(), name)
    if scalar.tag == NULL_TAG:
        if default is None:
            return None
        raise reader.error(node, f"{where}: expected a value, got nothing; remove the key to use "
                               f"the default ({getattr(default, 'value', default)})")
    # Text settings take the text as written; others take the YAML value, so that an
    # unquoted "on" is reported as the boolean YAML made of it.
    reader.check_usable(scalar, where)
    raw = scalar.value if FIELD_TYPES[name] is str else reader.typed(scalar, where)
    try:
        return convert(name, raw)
    except ValueError as exc:
        allowed = choices(name)
        hint = did_you_mean(raw, allowed) if allowed and isinstance(raw, str) else ""
        raise reader.error(node, f"{where}: {exc}{hint}{bool_hint(scalar)}") from None
