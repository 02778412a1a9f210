"""Reading a YAML file into a node tree with positions, on a budget, and the generic walker
that turns nodes into plain values with located errors (:class:`NodeReader`). The schema of
hosts.yaml lives in :mod:`tui.config.load`.

A hostile or broken file must be refused quickly and with little memory: the file size is
limited (:data:`MAX_FILE_BYTES`), the composer counts nodes (:data:`MAX_NODES`) and nesting
(:data:`MAX_DEPTH`), and merge keys (``<<: *anchor``) are expanded at most once per mapping
(memoised) and nested at most :data:`MAX_MERGE_DEPTH` deep, so neither an exponential
"merge bomb" nor a long chain of merges can hang the tool or overflow the stack. Values are
shown in messages shortened and escaped (:func:`trainer.settings.shown`)."""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from trainer.settings import shown

#: A hosts.yaml is a few kilobytes (a thousand tasks take 25 kB); a larger file is a
#: mistake or an attack. Reading is refused before parsing, at once.
MAX_FILE_BYTES = 128 * 1024
#: Nodes the composer may create (aliases are not copied, so this bounds the whole tree).
#: PyYAML composes about 30,000 nodes a second, so reaching the limit takes well under one.
MAX_NODES = 10_000
#: How deeply lists and mappings may nest; the schema needs 4.
MAX_DEPTH = 50
#: How deeply merge keys may merge mappings that merge mappings ...
MAX_MERGE_DEPTH = 20

_E = TypeVar("_E", bound=Enum)


class ConfigError(Exception):
    """A mistake in hosts.yaml, located as precisely as possible (``line`` and ``column``
    are 1-based; None when the mistake has no place in the file, e.g. a missing file)."""

    def __init__(self, path: str, line: int | None, column: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        super().__init__(path, line, column, message)

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"

# --- Reading the file --------------------------------------------------------------------

#: Line breaks as YAML 1.1 (and so PyYAML's marks) counts them.
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_BREAK_CHARS = "\n\r\x85\u2028\u2029"


def read_text(file: Path, label: str) -> str:
    """The file's text, or a ConfigError saying why it cannot be had."""
    try:
        # Read one byte past the limit, never the whole of a huge file (or of /dev/zero).
        with file.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(label, None, None, "file does not exist") from None
    except IsADirectoryError:
        raise ConfigError(label, None, None, "is a directory, expected a hosts.yaml file") from None
    except PermissionError:
        raise ConfigError(label, None, None, "cannot be read: permission denied") from None
    except OSError as exc:
        raise ConfigError(label, None, None, f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a path with a NUL character in it
        raise ConfigError(label, None, None, f"cannot be read: {exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(label, None, None, f"is larger than {MAX_FILE_BYTES // 1024} KiB; "
                                             "a hosts.yaml is a few kB, is this the right file?")
    if b"\0" in data:
        # NUL never occurs in YAML text; this is an image, an archive, UTF-16, ...
        raise ConfigError(label, None, None, "is not a text file (it contains NUL bytes); expected YAML")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[line_start:exc.start].decode("utf-8", "replace")) + 1
        raise ConfigError(label, line, column,
                          f"is not UTF-8 text (byte 0x{data[exc.start]:02x}); expected YAML") from None


def compose(text: str, label: str) -> Node | None:
    """The YAML node tree (None for a file with no content), or a located ConfigError."""
    if _FastLoader is not None and "\t" not in text and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        # libyaml's events, a seventh of the pure-Python parser's CPU (0.075 s for 64 hosts,
        # before the first line a run prints). A file it refuses is read again below, so
        # every syntax error is worded as the pure-Python parser words it; so is one with a
        # tab or a character that parser refuses (libyaml lets a tab separate key and value).
        fast = _FastLoader(text)
        try:
            return fast.get_single_node()
        except _OverBudget as exc:
            raise ConfigError(label, exc.line, exc.column, exc.message) from None
        except yaml.YAMLError:
            pass
        finally:
            fast.dispose()
    loader: _BudgetLoader | None = None
    try:
        loader = _BudgetLoader(text)  # the reader checks the characters here already
        return loader.get_single_node()
    except _OverBudget as exc:
        raise ConfigError(label, exc.line, exc.column, exc.message) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, label) from None
    except yaml.reader.ReaderError as exc:
        line, column = line_column(text, exc.position)
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise ConfigError(label, line, column,
                          f"character U+{ord(char):04X} is not allowed in YAML; is this a text file?"
                          ) from None
    except yaml.YAMLError as exc:  # no other kinds exist today; be safe if one appears
        raise ConfigError(label, None, None, f"invalid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


class _OverBudget(Exception):
    def __init__(self, event: ScalarEvent, message: str) -> None:
        super().__init__(message)
        mark = event.start_mark
        self.line: int | None = mark.line + 1 if mark is not None else None
        self.column: int | None = mark.column + 1 if mark is not None else None
        self.message = message


class _Budget(Composer):
    """PyYAML's composer, counting nodes (aliases included) and nesting as it goes: the
    composer is the only recursive part of PyYAML, and the node count bounds the tree."""

    _nodes = 0
    _depth = 0

    if TYPE_CHECKING:  # (the parser's, mixed in beside this class)
        def peek_event(self) -> ScalarEvent: ...  # (any event: its start_mark is read)
        def dispose(self) -> None: ...

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self._nodes += 1
        self._depth += 1
        try:
            if self._nodes > MAX_NODES:
                raise _OverBudget(self.peek_event(),
                                  f"more than {MAX_NODES} values; a hosts.yaml is far smaller")
            if self._depth > MAX_DEPTH:
                raise _OverBudget(self.peek_event(),
                                  f"lists and mappings nested more than {MAX_DEPTH} deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _BudgetLoader(_Budget, yaml.SafeLoader):
    """The pure-Python reader, scanner and parser under the budgeted composer."""


_FastLoader: Callable[[str], _Budget] | None = None
try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python parser alone
    pass
else:
    class _LibYamlLoader(_Budget, CParser, SafeConstructor, Resolver):
        """libyaml's parser under the budgeted composer. Its marks are given the text and
        position the pure-Python ones carry, which the loader's messages quote (the exact
        place of a placeholder inside a value)."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
            self._text = text

        def compose_node(self, parent: Node | None, index: int) -> Node | None:
            node = super().compose_node(parent, index)
            if node is not None and node.start_mark.buffer is None:  # (an alias's node: done)
                node.start_mark, node.end_mark = self._mark(node.start_mark), self._mark(node.end_mark)
            return node

        def _mark(self, mark: yaml.Mark) -> yaml.Mark:
            return yaml.Mark(mark.name, mark.index, mark.line, mark.column, self._text, mark.index)

        def dispose(self) -> None:
            self.anchors = {}  # (as the pure-Python loader's: no references kept)

    _FastLoader = _LibYamlLoader


def _syntax_error(exc: yaml.MarkedYAMLError, label: str) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    if mark is not None and _char_at(mark) == "\t":
        if _in_indentation(mark):
            return ConfigError(label, line, column, "tab in indentation; indent with spaces only")
        return ConfigError(label, line, column, "tab character; YAML allows only spaces between items")
    message = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
    if exc.problem and exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark is not mark:
            message += f" at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
        message += ")"
    return ConfigError(label, line, column, message)


def _char_at(mark: yaml.Mark) -> str | None:
    if mark.buffer is None or mark.pointer >= len(mark.buffer):
        return None
    return mark.buffer[mark.pointer]


def _in_indentation(mark: yaml.Mark) -> bool:
    """Whether only spaces and tabs precede ``mark`` on its line."""
    buffer = mark.buffer or ""
    i = mark.pointer - 1
    while i >= 0 and buffer[i] not in _BREAK_CHARS:
        if buffer[i] not in " \t":
            return False
        i -= 1
    return True


def line_column(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of ``text[index]``, counting line breaks as YAML does."""
    line, line_start = 1, 0
    for match in _LINE_BREAK.finditer(text, 0, index):
        line, line_start = line + 1, match.end()
    return line, index - line_start + 1


_TAG = "tag:yaml.org,2002:"
NULL_TAG, _BOOL, _INT, _FLOAT, _STR = (_TAG + t for t in ("null", "bool", "int", "float", "str"))
_TIMESTAMP, _MAP, _SEQ, _MERGE = (_TAG + t for t in ("timestamp", "map", "seq", "merge"))
#: Scalar tags that carry text we understand. ``timestamp`` is read as its text: no setting is
#: a date, and a bare date-like word is better taken literally than refused.
SCALAR_TAGS = frozenset({NULL_TAG, _BOOL, _INT, _FLOAT, _STR, _TIMESTAMP})
_CONSTRUCTOR = SafeConstructor()

class Item(NamedTuple):
    """One ``key: value`` pair of a mapping, both with their positions."""

    key: ScalarNode
    value: Node


class NodeReader:
    """Turns nodes of one file into values, raising :class:`ConfigError` located at the node."""

    def __init__(self, label: str, base_dir: Path) -> None:
        self.label = label
        self.base_dir = base_dir
        # Each mapping's items, by id(node): a mapping merged from many places (or merged
        # by mappings that are merged in turn) is expanded once, so a "merge bomb" whose
        # every level merges the one below ten times costs ten steps a level, not 10**levels.
        self._merged: dict[int, dict[str, Item]] = {}
        self._merge_work = 0

    # -- errors and plain values --

    def error(self, node: Node, message: str) -> ConfigError:
        mark = node.start_mark
        return ConfigError(self.label, mark.line + 1, mark.column + 1, message)

    def mapping(self, node: Node, where: str, expected: str = "a mapping") -> dict[str, Item]:
        """A mapping's items by key. ``null`` (a key with nothing under it) is an empty
        mapping. Merge keys (``<<: *anchor``) are honoured; repeated keys are an error."""
        if is_null(node):
            return {}
        if not isinstance(node, MappingNode) or node.tag != _MAP:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return self._items(node, where, frozenset())

    def _items(self, node: MappingNode, where: str, seen: frozenset[int]) -> dict[str, Item]:
        cached = self._merged.get(id(node))
        if cached is not None:
            return cached
        explicit: dict[str, Item] = {}
        merged: dict[str, Item] = {}
        seen = seen | {id(node)}  # an anchor can merge itself; don't loop forever
        for key, value in node.value:
            if key.tag == _MERGE:
                if len(seen) > MAX_MERGE_DEPTH:
                    raise self.error(key, f"{where}: merge keys ('<<') nested more than "
                                          f"{MAX_MERGE_DEPTH} deep")
                for source in self._merge_sources(value, where):
                    if id(source) not in seen:
                        items = self._items(source, where, seen)
                        self._merge_work += len(items)
                        if self._merge_work > MAX_NODES:
                            raise self.error(key, f"{where}: merge keys ('<<') expand to more than "
                                                  f"{MAX_NODES} values")
                        for name, item in items.items():
                            merged.setdefault(name, item)
                continue
            name = self.key_name(key, where)
            if name in explicit:
                first = explicit[name].key.start_mark
                raise self.error(key, f"duplicate key {shown(name)} in {where} "
                                      f"(first at line {first.line + 1}, column {first.column + 1})")
            explicit[name] = Item(key, value)
        items = {**merged, **explicit}  # keys written out win over merged ones, as in YAML
        self._merged[id(node)] = items
        return items

    def _merge_sources(self, node: Node, where: str) -> list[MappingNode]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self.error(source, f"{where}: '<<' merges a mapping, got {self.describe(source)}")
        return list(sources)

    def key_name(self, key: Node, where: str) -> str:
        if not isinstance(key, ScalarNode) or key.tag not in SCALAR_TAGS - {NULL_TAG} or key.value == "":
            raise self.error(key, f"{where}: expected a name as key, got {self.describe(key)}")
        return str(key.value)  # raw text: a key "on" or "1" is a name, not a boolean or number

    def check_keys(self, items: Mapping[str, Item], allowed: Iterable[str], where: str) -> None:
        allowed = tuple(allowed)
        for name, item in items.items():
            if name not in allowed:
                raise self.error(item.key, f"unknown key {shown(name)} in {where}"
                                           f"{did_you_mean(name, allowed, '; expected one of: ')}")

    def sequence(self, node: Node, where: str, expected: str) -> list[Node]:
        if is_null(node):
            return []
        if not isinstance(node, SequenceNode) or node.tag != _SEQ:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return list(node.value)

    def scalar(self, node: Node, where: str, expected: str) -> ScalarNode:
        if not isinstance(node, ScalarNode):
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        if node.tag not in SCALAR_TAGS:
            tag = short_tag(node.tag)
            raise self.error(node, f"{where}: unsupported YAML tag {shown(tag)}; expected {expected}")
        return node

    def typed(self, node: ScalarNode, where: str) -> object:
        """The scalar's YAML 1.1 value: None, bool, int, float or str."""
        try:
            if node.tag == NULL_TAG:
                return None
            if node.tag == _BOOL:
                return SafeConstructor.bool_values[node.value.lower()]
            if node.tag == _INT:
                return _CONSTRUCTOR.construct_yaml_int(node)
            if node.tag == _FLOAT:
                return _CONSTRUCTOR.construct_yaml_float(node)
        except (ValueError, KeyError):  # an explicit tag on a bad value, e.g. "!!int ten"
            raise self.error(node, f"{where}: {shown(node.value)} is not a valid "
                                   f"{short_tag(node.tag)}") from None
        return str(node.value)

    def text(self, node: Node, where: str) -> str:
        """A non-empty string. Numbers and booleans are taken as written (``user: 1001``)."""
        scalar = self.scalar(node, where, "text")
        if scalar.tag == NULL_TAG or not scalar.value.strip():
            raise self.error(node, f"{where}: expected text, got {self.describe(node)}")
        self.check_usable(scalar, where)
        return str(scalar.value)

    def integer(self, node: Node, where: str, minimum: int) -> int:
        expected = f"a whole number >= {minimum}"
        value = self.typed(self.scalar(node, where, expected), where)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return value

    def number(self, node: Node, where: str, minimum: float) -> float:
        expected = f"a number >= {minimum:g}"
        value = self.typed(self.scalar(node, where, expected), where)
        # Rejects .nan (fails >=) and .inf too: an endless wait is never what was meant.
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not minimum <= value < math.inf:
            raise self.error(node, f"{where}: expected {expected}, got {self.describe(node)}")
        return float(value)

    def boolean(self, node: Node, where: str) -> bool:
        """``true`` or ``false`` (YAML 1.1's other spellings of them too)."""
        value = self.typed(self.scalar(node, where, "true or false"), where)
        if not isinstance(value, bool):
            raise self.error(node, f"{where}: expected true or false, got {self.describe(node)}")
        return value

    def choice(self, node: Node, where: str, enum: type[_E]) -> _E:
        """One of ``enum``'s values, written as its text."""
        allowed = tuple(member.value for member in enum)
        value = self.typed(self.scalar(node, where, " or ".join(allowed)), where)
        if value not in allowed:
            hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
            raise self.error(node, f"{where}: expected one of {', '.join(allowed)}, "
                                   f"got {self.describe(node)}{hint}")
        return enum(value)

    def check_usable(self, node: ScalarNode, where: str) -> None:
        """Refuse text no path, command line or environment can carry: NUL, other control
        characters (a tab is allowed) and lone surrogates (YAML's ``"\\ud800"``, which no
        encoding can write)."""
        # YAML can spell these in double quotes, but they would fail (or mislead) much later.
        if "\0" in node.value:
            raise self.error(node, f"{where}: must not contain a NUL character (\\0)")
        for char in node.value:
            category = unicodedata.category(char)
            if category == "Cc" and char != "\t":
                raise self.error(node, f"{where}: must not contain the control character "
                                       f"U+{ord(char):04X}")
            if category == "Cs":
                raise self.error(node, f"{where}: must not contain a lone surrogate "
                                       f"U+{ord(char):04X} (it cannot be encoded)")

    def describe(self, node: Node) -> str:
        """How a value reads in a message: ``a list``, ``'fast'``, ``nothing``."""
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        if is_null(node):
            return "nothing"
        return f"{shown(node.value)}{bool_hint(node)}"

def is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == NULL_TAG


def present(item: Item) -> Node:
    """Where to point about an item's value: the value, or its key when the value is empty
    (an empty value's mark lies after the colon, often at the end of the line)."""
    return item.key if is_null(item.value) else item.value


def short_tag(tag: str) -> str:
    """``tag:yaml.org,2002:int`` -> ``!!int``, as it is written in YAML."""
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


def bool_hint(node: Node) -> str:
    if isinstance(node, ScalarNode) and node.tag == _BOOL:
        # YAML 1.1 reads unquoted yes/no/on/off/true/false as booleans; say so, since the
        # person wrote a word, not a boolean.
        return f" (YAML reads an unquoted {node.value} as a boolean; quote it if you meant the text)"
    return ""


def did_you_mean(word: str, allowed: Iterable[str], otherwise: str = "") -> str:
    """``; did you mean 'steps'?`` for the closest allowed word, else ``otherwise`` + all."""
    allowed = tuple(allowed)
    close = [] if len(word) > 100 else difflib.get_close_matches(word, allowed, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"{otherwise}{', '.join(allowed)}" if otherwise else ""



