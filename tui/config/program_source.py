"""What a user's program's own source says, read before anything runs: whether its entry
file constructs a TF2 ``ParameterServerStrategy``, whose coordinator is the cluster's
``chief`` task. Without a ``chief:`` job nothing would ever coordinate it: the ps and
workers serve and wait forever (at run time the shim can only say so once they are up)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yaml.nodes import ScalarNode

from tui.config.cluster import Job, TaskSpec
from tui.config.program import is_python, module_index, script_index
from tui.config.program_spec import ProgramSpec, placeholder_names
from tui.config.yamlload import NodeReader

#: The names TensorFlow 2 gives the strategy (``tf.distribute.ParameterServerStrategy``, its
#: ``experimental`` alias, the class's own name in its module).
PSS_NAMES = frozenset({"ParameterServerStrategy", "ParameterServerStrategyV2"})
#: A bigger entry file is not read (it is generated, or not Python).
MAX_SOURCE_BYTES = 4 << 20


@dataclass(frozen=True)
class SourceSpot:
    """A place in a program's source (1-based line and column)."""

    path: Path
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


def entry_file(spec: ProgramSpec) -> Path | None:
    """The Python file a ``python script.py`` or ``python -m package.module`` command runs
    first, when it lies in hosts.yaml's folder; None for anything else (a binary, a path
    known only at launch, a module installed elsewhere)."""
    argv = spec.command
    if not argv or not is_python(argv[0]):
        return None
    if (index := script_index(argv)) is not None:
        path = spec.base_dir / argv[index]
        candidates = [path] if not list(placeholder_names(argv[index])) else []
    elif (index := module_index(argv)) is not None and not list(placeholder_names(argv[index])):
        module = spec.base_dir.joinpath(*argv[index].split("."))
        candidates = [module.with_suffix(".py"), module / "__main__.py"]
    else:
        return None
    return next((c for c in candidates if c.is_file()), None)


def pss_construction(path: Path) -> SourceSpot | None:
    """Where ``path`` first calls ``ParameterServerStrategy(...)`` (by any module path), or
    None. A name in a comment or a string is no call; a file that does not parse is left
    to Python to report when it runs."""
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    spots = [(node.lineno, node.col_offset + 1) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and _called_name(node.func) in PSS_NAMES]
    return SourceSpot(path, *min(spots)) if spots else None


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def check_coordinator(loader: NodeReader, cluster_key: ScalarNode, spec: ProgramSpec,
                      tasks: Sequence[TaskSpec]) -> None:
    """A program that constructs a ParameterServerStrategy in a cluster without a ``chief``
    job is a config error at ``cluster:`` (it would never start coordinating, and after a
    minute every task would be called stalled)."""
    if any(task.job is Job.CHIEF for task in tasks) or (entry := entry_file(spec)) is None:
        return
    if (spot := pss_construction(entry)) is None:
        return
    shown = SourceSpot(entry.relative_to(spec.base_dir) if entry.is_relative_to(spec.base_dir) else entry,
                       spot.line, spot.column)
    raise loader.error(cluster_key, f"cluster: the program constructs a ParameterServerStrategy ({shown}), "
                                    f"whose coordinator is the chief, and the cluster has no chief: job; "
                                    f"add one (e.g. chief: [localhost:auto]) or nothing coordinates the "
                                    f"workers")
