"""Every benchmark, found by scanning the group packages (``bench/training/``,
``bench/controller/``, ``bench/hosts/``, and any other package beside them but this harness):
a module is a benchmark when it sets a module-level ``RUN_TIME`` string. Modules are read,
not imported, so listing costs no TensorFlow or Textual import and a new module shows up
without being registered anywhere."""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

#: The folder of the ``bench`` package.
BENCH = Path(__file__).resolve().parents[1]
#: Packages under ``bench/`` that hold no benchmark of their own.
NOT_GROUPS = frozenset({"harness"})
#: What ``RUN_TIME`` says: ``about N min`` (N a number, or a range such as ``2-3``).
RUN_TIME_FORM = re.compile(r"about \d+(-\d+)? min")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark module: its name (``group.module``, or ``group`` for a group's own
    ``__main__``), what it measures (its docstring's first sentence) and its run time."""

    name: str
    module: str
    path: Path
    summary: str
    run_time: str


class UnknownBenchmark(LookupError):
    """A name that is no benchmark, or more than one."""


def discover(root: Path = BENCH) -> list[Benchmark]:
    """Every benchmark below ``root`` (a ``bench`` folder), sorted by name."""
    found = []
    for group in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        if group.name in NOT_GROUPS:
            continue
        for path in sorted(group.glob("*.py")):
            if path.name == "__init__.py":
                continue
            benchmark = _read(path, group.name, root.name)
            if benchmark is not None:
                found.append(benchmark)
    return sorted(found, key=lambda b: b.name)


def _read(path: Path, group: str, package: str) -> Benchmark | None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    run_time = next((node.value.value for node in tree.body
                     if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                     and isinstance(node.value.value, str)
                     and any(isinstance(t, ast.Name) and t.id == "RUN_TIME" for t in node.targets)),
                    None)
    if run_time is None:
        return None
    stem = path.stem
    name = group if stem == "__main__" else f"{group}.{stem}"
    module = f"{package}.{group}" if stem == "__main__" else f"{package}.{group}.{stem}"
    return Benchmark(name, module, path, summary(ast.get_docstring(tree) or ""), run_time)


def summary(docstring: str, width: int = 100) -> str:
    """The first sentence of ``docstring``'s first paragraph, on one line, plain (no Sphinx
    roles or double backquotes), cut at a word to ``width`` characters."""
    paragraph = " ".join(docstring.strip().split("\n\n", 1)[0].split())
    paragraph = re.sub(r":\w+:`([^`]*)`", r"\1", paragraph).replace("``", "`")
    match = re.search(r"\.(\s|$)", paragraph)
    sentence = paragraph[:match.start()] if match else paragraph
    if len(sentence) <= width:
        return sentence
    return sentence[:width - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def find(name: str, benchmarks: Sequence[Benchmark]) -> Benchmark:
    """The benchmark ``name`` names: ``flood``, ``controller.flood``,
    ``bench.controller.flood`` or ``bench/controller/flood.py``."""
    wanted = name.removesuffix(".py").replace("/", ".").removeprefix("bench.")
    exact = [b for b in benchmarks if b.name == wanted]
    matches = exact or [b for b in benchmarks if b.name.rsplit(".", 1)[-1] == wanted]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UnknownBenchmark(f"{name!r} names {len(matches)} benchmarks: "
                               + ", ".join(b.name for b in matches) + "; give its group too")
    raise UnknownBenchmark(f"no benchmark {name!r}; `python -m bench --list` names them all")


def listing(benchmarks: Sequence[Benchmark]) -> str:
    """One line per benchmark: its name, its run time and what it measures."""
    width = max((len(b.name) for b in benchmarks), default=0)
    times = max((len(b.run_time) for b in benchmarks), default=0)
    return "\n".join(f"{b.name:<{width}}  {b.run_time:<{times}}  {b.summary}" for b in benchmarks)


def run(benchmark: Benchmark, argv: Sequence[str]) -> NoReturn:
    """Become ``python -m MODULE ARGV``: a process of its own, as the module's docstring says
    to run it (``python -m bench`` has imported some benchmarks already, and a module run
    over its imported self is warned about)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", benchmark.module, *argv])
