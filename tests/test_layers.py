"""The layers of ``tui/`` as the tree shows them: each package imports only from the layers
below it, no module imports a module that (directly or not) imports it back, and nothing
hides an import inside a function to dodge either rule. The core and the headless front end
never load Textual or TensorFlow."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TUI = REPO / "tui"

#: Lowest first. A module of a layer may import from its own layer and the layers before it.
LAYERS = ("common", "config", "launch", "program", "plan", "core", "interop", "headless",
          "experiments", "app", "cli")
#: Imports made inside functions on purpose, and why: each makes a launcher or front end
#: only when it is used (asyncssh takes half a second to import; Textual more).
LAZY = {
    ("tui.launch.kinds", "tui.launch.local.launcher"): "launchers are made on first use",
    ("tui.launch.kinds", "tui.launch.ssh.launcher"): "asyncssh only for clusters with remote hosts",
    ("tui.launch.kinds", "tui.launch.slurm.launcher"): "launchers are made on first use",
    ("tui.launch.router", "tui.launch.ssh.launcher"): "asyncssh only for clusters with remote hosts",
    ("tui.cli", "tui.headless"): "the app's start does not pay for the headless printer",
    ("tui.cli", "tui.app.process_bridge"): "the app's core starts before Textual loads; "
                                           "headless never loads the app's modules",
    ("tui.app.main", "tui.headless"): "the app prints headless's summary on quitting, not before",
    ("tui.headless", "tui.core.session"): "the hosts' first line is out before the session's "
                                          "launchers and supervisor load",
    ("tui.headless", "tui.plan.preflight"): "loaded with the session, after the first line",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "cli"


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """Every ``tui`` module ``path`` imports, and whether the import is at module level
    (``if TYPE_CHECKING:`` blocks count as module level: they never run)."""
    tree = ast.parse(path.read_text())
    top = set()
    for node in tree.body:
        top.add(node)
        if isinstance(node, ast.If):
            top.update(node.body)
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, base]).rstrip(".")
            names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = name if _exists(name) else base
                if target.startswith("tui"):
                    yield target, node in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tui"):
                    yield alias.name, node in top


def _exists(module: str) -> bool:
    path = REPO.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@functools.cache
def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Every module's imports of other ``tui`` modules, and the function-level imports that
    :data:`LAZY` does not explain. Parsed once per test process: the five tests that read it
    parsed every module of ``tui/`` again each (read only, so one parse serves them all)."""
    edges: dict[str, set[str]] = {}
    hidden: list[str] = []
    for path in TUI.rglob("*.py"):
        name = module_name(path)
        edges[name] = set()
        for target, at_top in imports(path):
            if target == name or target == "tui":
                continue
            if not at_top and (name, target) not in LAZY:
                hidden.append(f"{name} -> {target}")
            edges[name].add(target)
    return edges, hidden


def test_no_import_hides_in_a_function() -> None:
    assert not graph()[1], "\n".join(sorted(graph()[1]))


def test_every_package_is_a_known_layer() -> None:
    packages = {p.name for p in TUI.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in TUI.glob("*.py")} - {"__init__", "__main__", "cli"}
    assert packages | modules <= set(LAYERS), "a new top-level package needs a place in LAYERS"


def test_no_import_goes_up_a_layer() -> None:
    upward = []
    for module, targets in graph()[0].items():
        for target in targets:
            if LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(module)):
                upward.append(f"{module} -> {target}")
    assert not upward, "\n".join(sorted(upward))


#: The launchers' rooms: each kind's launcher and what only it uses. What they share stays in
#: ``tui/launch/`` itself.
ROOMS = ("tui.launch.local", "tui.launch.ssh", "tui.launch.slurm")


def room_of(module: str) -> str | None:
    return next((room for room in ROOMS if module == room or module.startswith(room + ".")), None)


def test_every_launcher_has_a_room() -> None:
    for room in ROOMS:
        assert (REPO.joinpath(*room.split(".")) / "launcher.py").exists(), room


def test_no_launcher_imports_another_launchers_room() -> None:
    crossing = []
    for module, targets in graph()[0].items():
        here = room_of(module)
        for target in targets:
            there = room_of(target)
            if there is not None and here is not None and there != here:
                crossing.append(f"{module} -> {target}")
    assert not crossing, "\n".join(sorted(crossing))


def test_what_launchers_share_imports_no_room_but_the_registry() -> None:
    """The shared modules of ``tui/launch/`` sit below the rooms; only the registry of kinds
    and the router, which pick a launcher, reach into one (lazily: see :data:`LAZY`)."""
    upward = []
    for module, targets in graph()[0].items():
        if layer_of(module) != "launch" or room_of(module) is not None:
            continue
        if module in ("tui.launch.kinds", "tui.launch.router"):
            continue
        upward += [f"{module} -> {t}" for t in targets if room_of(t) is not None]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_cycles() -> None:
    edges = graph()[0]
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


#: What a headless run loads: everything below the Textual front end.
CORE = ["tui.core.supervisor.lifecycle", "tui.launch.local.launcher", "tui.launch.router", "tui.core.options",
        "tui.cli", "tui.headless", "tui.launch.leftovers", "tui.core.rundir", "tui.core.events",
        "tui.plan.tasks", "tui.core.progress", "tui.core.session", "tui.core.commands",
        "tui.core.task_state", "tui.config.restart_policy", "tui.app.controls"]


def loaded_by(*modules: str) -> set[str]:
    script = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    return set(json.loads(result.stdout))


def test_core_imports_neither_textual_nor_tensorflow() -> None:
    modules = loaded_by(*CORE)
    assert not {m for m in modules if m.split(".")[0] in ("textual", "tensorflow", "keras")}
    assert not {m for m in modules if m.startswith("tui.app.") and m != "tui.app.controls"}
    # asyncssh takes half a second to import: only a cluster with remote hosts pays for it.
    assert not {m for m in modules if m.split(".")[0] == "asyncssh"}
    # Standard-library-only trainer modules: the contract (flags, events, share variables, the
    # shim's bootstrap line).
    assert {m for m in modules if m.startswith("trainer.")} <= {"trainer.protocol", "trainer.settings",
                                                                 "trainer.threads", "trainer.shim",
                                                                 "trainer.warm", "trainer.warm.wire"}


def test_lower_layers_load_little() -> None:
    """The task-program interface and ``tfdist-tui import`` need neither the supervisor nor the
    launchers' routing: a narrow import stays narrow."""
    program = {m for m in loaded_by("tui.program.base") if m.startswith("tui.")}
    assert not {m for m in program if layer_of(m) in ("core", "plan", "headless", "app")}
    importer = {m for m in loaded_by("tui.interop.importer") if m.startswith("tui.")}
    assert not {m for m in importer if layer_of(m) in ("core", "launch", "headless", "app")}, importer
