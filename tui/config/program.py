"""Reading the ``program:`` section of hosts.yaml (and, with it, ``training:`` as free-form
values). Called by :mod:`tui.config.load`'s loader, whose located-error helpers it uses, so every
mistake is a ``ConfigError`` with file:line:column."""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import re
import shlex
import string
from pathlib import Path, PurePosixPath
from typing import Any

from yaml.nodes import Node, ScalarNode, SequenceNode

from trainer.settings import TrainingSettings
from tui.config import keys
from tui.config.program_spec import MetricField, MetricPattern, Placeholder, ProgramSpec, placeholder_names
from tui.config.training import training_setting
from tui.config.yamlload import ConfigError, Item, NodeReader

PROGRAM_KEYS = tuple(keys.PROGRAM)
#: ``training:`` keys that keep their meaning with a user's program (toggles, progress,
#: default directories); every other key is a free-form value for the placeholders.
DRIVEN_SETTINGS = ("mode", "partitions", "fuse", "steps", "checkpoint_dir", "summary_dir")
_PYTHON = re.compile(r"python(3(\.\d+)?)?")
#: Python options that take the next argument as their value.
_PYTHON_VALUE_OPTIONS = frozenset({"-W", "-X", "-Q"})
#: ``NAME=value`` before the program: a shell would put it in the program's environment.
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
#: Variables the controller sets for each task itself (an assignment would break the cluster).
_CONTROLLER_ENV = ("TF_CONFIG",)


def is_python(executable: str) -> bool:
    """``python``, ``python3`` or ``python3.11``: run with the host's configured Python."""
    return runs_python(executable) and "/" not in executable


def runs_python(executable: str) -> bool:
    """A Python interpreter, by name (:func:`is_python`) or by its path
    (``/opt/venv/bin/python3``, run as given): its script can run under the shim."""
    return bool(_PYTHON.fullmatch(PurePosixPath(executable).name))


def script_index(argv: tuple[str, ...]) -> int | None:
    """Where the script is in a ``python [options] script.py args`` command, or None when
    Python runs something else (``-m module``, ``-c code``, nothing)."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-m", "-c", "-") or (arg.startswith(("-m", "-c")) and len(arg) > 2):
            return None
        if not arg.startswith("-"):
            return i
        i += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
    return None


def module_index(argv: tuple[str, ...]) -> int | None:
    """Where the module is in a ``python [options] -m package.module args`` command (the
    argument after ``-m``; ``-mname`` is not split), or None for any other form."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return i + 1 if i + 1 < len(argv) else None
        if arg in ("-c", "-") or arg.startswith(("-m", "-c")) or not arg.startswith("-"):
            return None
        i += 2 if arg in _PYTHON_VALUE_OPTIONS else 1
    return None


def load(loader: NodeReader, item: Item, training: Item | None, *,
         local_python: bool = False) -> tuple[TrainingSettings, ProgramSpec]:
    """The training settings the controller drives and the program, from ``program:`` and
    ``training:``. ``local_python``: every task runs on this machine with the controller's
    own interpreter, so a ``-m`` package that is neither in the folder nor installed for it
    will not be found at run time either."""
    settings, values = _training(loader, training)
    where = "program"
    items = loader.mapping(item.value, where, "a mapping with command: and optionally upload:, "
                                              "batch_size:, metrics:, shim:")
    loader.check_keys(items, PROGRAM_KEYS, where)
    if "command" not in items:
        raise loader.error(item.key, "program: missing key 'command' (what every task runs), e.g. "
                                     "command: python train.py --job_name={job} --task_index={index}")
    known = frozenset(p.value for p in Placeholder) | values.keys() | set(DRIVEN_SETTINGS)
    env, command = _command(loader, items["command"], known, local_python)
    _check_values(loader, training, values, (*command, *env.values()))
    fields: dict[str, Any] = {"command": command, "base_dir": loader.base_dir, "values": values, "env": env}
    if "upload" in items:
        fields["upload"] = _folder(loader, items["upload"].value, "program.upload")
        _check_in_upload(loader, command, fields["upload"], items["upload"].value)
    if "batch_size" in items:
        fields["batch_size"] = loader.integer(items["batch_size"].value, "program.batch_size", 1)
    elif values.get("batch_size", "").isdigit() and int(values["batch_size"]) > 0:
        fields["batch_size"] = int(values["batch_size"])
    if "metrics" in items:
        fields["metrics"] = _metrics(loader, items["metrics"].value)
    if "shim" in items:
        fields["shim"] = loader.boolean(items["shim"].value, "program.shim")
    return settings, ProgramSpec(**fields)


def _training(loader: NodeReader, item: Item | None) -> tuple[TrainingSettings, dict[str, str]]:
    items = loader.mapping(item.value, "training", "a mapping of values") if item else {}
    driven: dict[str, Any] = {}
    values: dict[str, str] = {}
    for name, entry in items.items():
        if name in DRIVEN_SETTINGS:
            driven[name] = training_setting(loader, name, entry.value)
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise loader.error(entry.key, f"training: {name!r} cannot be a placeholder name "
                                          f"(letters, digits and '_')")
        scalar = loader.scalar(entry.value, f"training.{name}", "a single value")
        loader.check_usable(scalar, f"training.{name}")
        values[name] = str(scalar.value)  # as written: "0.10" stays "0.10"
    settings = dataclasses.replace(TrainingSettings(), **driven)
    for name, problem in settings.problems():
        raise loader.error(items[name].value, f"training.{name}: {problem}")
    return settings, values


def _command(loader: NodeReader, item: Item, known: frozenset[str],
             local_python: bool) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables the command assigns before its program, and the program's arguments."""
    node = item.value
    where = "program.command"
    expected = "a command line (text) or a list of arguments"
    parts: list[tuple[str, ScalarNode]]
    if isinstance(node, SequenceNode):
        parts = []
        for i, element in enumerate(loader.sequence(node, where, expected)):
            scalar = loader.scalar(element, f"{where}[{i}]", "text")
            loader.check_usable(scalar, f"{where}[{i}]")
            parts.append((str(scalar.value), scalar))
    else:
        scalar = loader.scalar(node, where, expected)
        loader.check_usable(scalar, where)
        text = "" if loader.typed(scalar, where) is None else str(scalar.value)
        try:
            parts = [(arg, scalar) for arg in shlex.split(text)]
        except ValueError as exc:  # "No closing quotation"
            raise loader.error(node, f"{where}: cannot be split like a shell would: {exc}") from None
    if not parts:
        raise loader.error(item.key if _is_empty(node) else node,
                           f"{where}: empty command; expected e.g. python train.py --task_index={{index}}")
    for arg, at in parts:
        _check_placeholders(loader, arg, at, known)
    env, parts = _assignments(loader, parts, where)
    argv = tuple(arg for arg, _ in parts)
    _check_executable(loader, argv, parts, local_python)
    return env, argv


def _assignments(loader: NodeReader, parts: list[tuple[str, ScalarNode]],
                 where: str) -> tuple[dict[str, str], list[tuple[str, ScalarNode]]]:
    """``NAME=value`` words before the program (also after ``env``), taken as a shell takes
    them: the task's environment, and the program is what follows. The command is never run
    by a shell, so left in place the first of them would be run as the program (``cannot
    run TF_USE_LEGACY_KERAS=1``), and after ``env`` the ``python`` would be whichever one
    PATH finds first rather than the host's."""
    words = list(parts)
    if len(words) > 1 and PurePosixPath(words[0][0]).name == "env" and _ASSIGNMENT.fullmatch(words[1][0]):
        words.pop(0)
    env: dict[str, str] = {}
    while words and (match := _ASSIGNMENT.fullmatch(words[0][0])):
        arg, node = words.pop(0)
        if match[1] in _CONTROLLER_ENV:
            raise _at(loader, node, arg, f"{where}: {match[1]} is set by tfdist-tui for each task; "
                                         f"leave it out")
        env[match[1]] = match[2]
    if not words:
        arg, node = parts[-1]
        raise _at(loader, node, arg, f"{where}: {arg!r} sets a variable but no program follows; "
                                     f"expected e.g. {arg} python train.py")
    return env, words


def _check_values(loader: NodeReader, training: Item | None, values: dict[str, str],
                  command: tuple[str, ...]) -> None:
    """A ``training:`` key the command never names and that is no setting we know is a typo
    (``setps: 500`` would otherwise leave the program on its own default, silently)."""
    if training is None or not values:
        return
    used = {name for arg in command for name in placeholder_names(arg)}
    settings = {f.name for f in dataclasses.fields(TrainingSettings)}
    items = loader.mapping(training.value, "training", "a mapping of values")
    for name in values:
        if name in used or name in settings:
            continue
        close = difflib.get_close_matches(name, sorted(used | set(DRIVEN_SETTINGS)), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise loader.error(items[name].key,
                           f"training: {name!r} is neither a setting nor used in program.command "
                           f"as {{{name}}}{hint}")


def _is_empty(node: Node) -> bool:
    return (isinstance(node, ScalarNode) and not str(node.value).strip()) or \
        (isinstance(node, SequenceNode) and not node.value)


def _check_placeholders(loader: NodeReader, arg: str, node: ScalarNode, known: frozenset[str]) -> None:
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(arg)
                  if name is not None]
    except ValueError as exc:
        raise _at(loader, node, arg, f"program.command: {exc} in {arg!r}; write {{{{ and }}}} "
                                     f"for literal braces") from None
    for name, spec, conversion in fields:
        if spec or conversion:
            raise _at(loader, node, "{" + name, f"program.command: placeholders take no format or "
                                                 f"conversion; write {{{name}}}")
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {{{close[0]}}}?" if close else ""
            raise _at(loader, node, "{" + name,
                      f"program.command: unknown placeholder {{{name}}}{hint} (placeholders: "
                      f"{', '.join(p.value for p in Placeholder)} and the training: keys)")


def _check_executable(loader: NodeReader, argv: tuple[str, ...], parts: list[tuple[str, ScalarNode]],
                      local_python: bool = False) -> None:
    """A script or program given by a relative path must exist in hosts.yaml's folder (where
    local tasks run, and what ``upload: .`` copies); so must an interpreter given by a
    relative path (``.venv/bin/python``)."""
    if runs_python(argv[0]) and not is_python(argv[0]):
        _check_path(loader, argv[0], parts[0][1], "program")
    if runs_python(argv[0]) and (module := module_index(argv)) is not None:
        # Only the controller's own Python is known here: another interpreter has its own packages.
        _check_module(loader, argv[module], parts[module][1], local_python and is_python(argv[0]))
        return
    index = script_index(argv) if runs_python(argv[0]) else (0 if "/" in argv[0] else None)
    if index is not None:
        _check_path(loader, argv[index], parts[index][1], "script" if index else "program")


def _check_path(loader: NodeReader, path: str, node: ScalarNode, what: str) -> None:
    if list(placeholder_names(path)) or PurePosixPath(path).is_absolute():
        return  # known only at launch, or a path on the hosts themselves
    if not (loader.base_dir / path).is_file():
        raise _at(loader, node, path, f"program.command: {what} {path!r} does not exist in {loader.base_dir}")


def _check_module(loader: NodeReader, module: str, node: ScalarNode, local_python: bool = False) -> None:
    """``-m package.module`` whose package is in hosts.yaml's folder must name a module of
    it that exists; a package that is not there must be installed for the controller's
    Python when every task runs with it (one installed on other hosts is theirs to know).
    ``-m`` takes a dotted name, never a path."""
    if list(placeholder_names(module)):
        return
    if "/" in module or module.endswith(".py"):
        dotted = module.removesuffix(".py").strip("/").replace("/", ".")
        raise _at(loader, node, module, f"program.command: -m takes a module's dotted name, not a path; "
                                        f"did you mean {dotted!r}?")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", module):
        return
    names = module.split(".")
    top = loader.base_dir / names[0]
    if not (top.is_dir() or top.with_suffix(".py").is_file()):
        if local_python and importlib.util.find_spec(names[0]) is None:
            packages = sorted(p.name for p in loader.base_dir.iterdir() if (p / "__init__.py").is_file())
            close = difflib.get_close_matches(names[0], packages, n=1)
            hint = f"; did you mean {'.'.join([close[0], *names[1:]])!r}?" if close else ""
            raise _at(loader, node, module, f"program.command: module {module!r}: no package {names[0]!r} in "
                                            f"{loader.base_dir}, and none installed for this Python{hint}")
        return
    folder = loader.base_dir.joinpath(*names[:-1])
    path = folder / names[-1]
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or \
            (len(names) == 1 and path.is_dir()):
        return
    siblings = sorted({p.stem for p in folder.glob("*.py")} |
                      {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}) \
        if folder.is_dir() else []
    close = difflib.get_close_matches(names[-1], siblings, n=1)
    hint = f"; did you mean {'.'.join([*names[:-1], close[0]])!r}?" if close else ""
    raise _at(loader, node, module, f"program.command: module {module!r} does not exist in "
                                    f"{loader.base_dir}{hint}")


def _check_in_upload(loader: NodeReader, argv: tuple[str, ...], upload: Path, node: Node) -> None:
    """Remote tasks run in the uploaded copy of ``upload``: a relative script must be found
    there too, or every remote task fails only once it starts (``upload: ../..`` with the
    script beside hosts.yaml). Checked here, before anything runs."""
    index = script_index(argv) if runs_python(argv[0]) else (0 if "/" in argv[0] else None)
    if index is None:
        return
    path = argv[index]
    if list(placeholder_names(path)) or PurePosixPath(path).is_absolute():
        return
    if not (upload / path).is_file():
        raise loader.error(node, f"program.upload: remote tasks run {path!r} in the copy of {upload}, "
                                 f"which has no {path}; upload the folder that holds it (or write its path "
                                 f"from {upload})")


def _at(loader: NodeReader, node: ScalarNode, text: str, message: str) -> ConfigError:
    """An error at ``text`` inside ``node`` when it is written there literally, else at the node."""
    start, end = node.start_mark, node.end_mark
    buffer = start.buffer or ""
    found = buffer.find(text, start.pointer, end.pointer) if text else -1
    if found < 0:
        return loader.error(node, message)
    before = buffer[start.pointer:found]
    line = start.line + before.count("\n")
    column = found - (buffer.rfind("\n", 0, found) + 1) if "\n" in before else start.column + len(before)
    return ConfigError(loader.label, line + 1, column + 1, message)


def _folder(loader: NodeReader, node: Node, where: str) -> Path:
    folder = (loader.base_dir / Path(loader.text(node, where)).expanduser()).resolve()
    if not folder.is_dir():
        raise loader.error(node, f"{where}: {folder} is not a folder")
    return folder


def _metrics(loader: NodeReader, node: Node) -> tuple[MetricPattern, ...]:
    allowed = tuple(f.value for f in MetricField)
    patterns = []
    for i, element in enumerate(loader.sequence(node, "program.metrics", "a list of regular expressions")):
        where = f"program.metrics[{i}]"
        text = loader.text(element, where)
        try:
            regex = re.compile(text)
        except re.error as exc:
            position = f" at character {exc.pos + 1}" if exc.pos is not None else ""
            raise loader.error(element, f"{where}: not a valid regular expression: "
                                        f"{exc.msg}{position}") from None
        unknown = [name for name in regex.groupindex if name not in allowed]
        if unknown or not regex.groupindex:
            what = f"unknown group name {unknown[0]!r}" if unknown else "no named group"
            raise loader.error(element, f"{where}: {what}; name groups after what they capture: "
                                        f"{', '.join(f'(?P<{a}>...)' for a in allowed)}")
        patterns.append(MetricPattern(regex))
    return tuple(patterns)

