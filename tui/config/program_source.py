"""What a user's program's own source says, read before anything runs: whether it (its entry
file, or a module of its own that it imports) constructs a TF2 ``ParameterServerStrategy``,
whose coordinator is the cluster's ``chief`` task. Without a ``chief:`` job nothing would ever
coordinate it: the ps and workers serve and wait forever (at run time the shim can only say
so once they are up)."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yaml.nodes import ScalarNode

from tui.config.cluster import Job, TaskSpec
from tui.config.program import module_index, runs_python, script_index
from tui.config.program_spec import ProgramSpec, placeholder_names
from tui.config.yamlload import NodeReader

#: The names TensorFlow 2 gives the strategy (``tf.distribute.ParameterServerStrategy``, its
#: ``experimental`` alias, the class's own name in its module).
PSS_NAMES = frozenset({"ParameterServerStrategy", "ParameterServerStrategyV2"})
#: A bigger source file is not read (it is generated, or not Python).
MAX_SOURCE_BYTES = 4 << 20
#: The program's own files read at most, following its imports from the entry file.
MAX_FILES = 64


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
    if not argv or not runs_python(argv[0]):
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


def pss_spot(spec: ProgramSpec) -> SourceSpot | None:
    """Where the program ``spec`` runs first calls ``ParameterServerStrategy(...)`` (by any
    module path), in its entry file or a module of its own that it imports; None when it
    does not, or when its entry file is not known before it runs. A name in a comment or a
    string is no call; a file that does not parse is left to Python to report when it runs."""
    if (entry := entry_file(spec)) is None:
        return None
    # Where its own imports are found first: the script's folder for ``python script.py``,
    # the working folder for ``python -m module``.
    roots = [entry.parent] if script_index(spec.command) is not None else [spec.base_dir]
    return pss_in_program(entry, roots)


def pss_in_program(entry: Path, roots: Sequence[Path]) -> SourceSpot | None:
    """Where the program that starts at ``entry`` first calls ``ParameterServerStrategy``:
    in the entry file or in a module of the program's own that it imports (found under
    ``roots``, the folders its ``sys.path`` starts with), breadth first, at most
    :data:`MAX_FILES` files. Users build the strategy in a helper module as often as in
    the script itself."""
    seen = {entry.resolve()}
    queue = deque([entry])
    while queue:
        path = queue.popleft()
        if (tree := _parse(path)) is None:
            continue
        if (spot := _first_pss_call(tree, path)) is not None:
            return spot
        for found in _imported_files(tree, path, roots):
            if (key := found.resolve()) not in seen and len(seen) < MAX_FILES:
                seen.add(key)
                queue.append(found)
    return None


def _parse(path: Path) -> ast.Module | None:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _first_pss_call(tree: ast.Module, path: Path) -> SourceSpot | None:
    spots = [(node.lineno, node.col_offset + 1) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and _called_name(node.func) in PSS_NAMES]
    return SourceSpot(path, *min(spots)) if spots else None


def _imported_files(tree: ast.Module, path: Path, roots: Sequence[Path]) -> list[Path]:
    """The files of the program's own modules that ``tree`` imports (``import a.b``,
    ``from a import b``, ``from .b import c``); modules found nowhere under ``roots`` (the
    standard library, installed packages) are not followed."""
    found: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_files(alias.name.split("."), roots)
        elif isinstance(node, ast.ImportFrom):
            if node.level > len(path.parents):
                continue
            parts = node.module.split(".") if node.module else []
            bases = [path.parents[node.level - 1]] if node.level else list(roots)
            found += _module_files(parts, bases)
            for alias in node.names:  # ``from pkg import module``
                found += _module_files([*parts, alias.name], bases)
    return found


def _module_files(parts: Sequence[str], roots: Sequence[Path]) -> list[Path]:
    """The file each prefix of dotted module ``parts`` is under the first root holding it."""
    for root in roots:
        files = []
        for depth in range(1, len(parts) + 1):
            module = root.joinpath(*parts[:depth])
            candidate = next((c for c in (module.with_suffix(".py"), module / "__init__.py")
                              if c.is_file()), None)
            if candidate is None:
                break
            files.append(candidate)
        if files:
            return files
    return []


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def check_coordinator(loader: NodeReader, cluster_key: ScalarNode, spec: ProgramSpec,
                      tasks: Sequence[TaskSpec]) -> None:
    """A program that constructs a ParameterServerStrategy in a cluster without a ``chief``
    job is a config error at ``cluster:`` (it would never start coordinating, and after a
    minute every task would be called stalled)."""
    if any(task.job is Job.CHIEF for task in tasks) or (spot := pss_spot(spec)) is None:
        return
    path = spot.path
    shown = SourceSpot(path.relative_to(spec.base_dir) if path.is_relative_to(spec.base_dir) else path,
                       spot.line, spot.column)
    raise loader.error(cluster_key, f"cluster: the program constructs a ParameterServerStrategy ({shown}), "
                                    f"whose coordinator is the chief, and the cluster has no chief: job; "
                                    f"add one (e.g. chief: [localhost:auto]) or nothing coordinates the "
                                    f"workers")
