"""Figures (median with min–max over repetitions, an optional target and a verdict), the
machine they were measured on, and the Markdown they are written as: BENCHMARKS.md, whose
every section names the run that produced it (:class:`Stamp`) and whose Targets table is
built from the sections' target lines (:func:`with_targets`), so the two cannot disagree."""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import re
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import psutil

from tui.launch.snippets.probe import DISTRIBUTIONS


@dataclass(frozen=True)
class Target:
    """A bound the median must meet: ``figure <op> value``, op one of ``<``, ``<=``, ``>=``."""

    op: str
    value: float
    unit: str = ""

    def __post_init__(self) -> None:
        if self.op not in _SYMBOLS:
            raise ValueError(f"target op must be one of {', '.join(_SYMBOLS)}, got {self.op!r}")

    def met(self, value: float) -> bool:
        """Whether ``value`` meets the target."""
        if self.op == "<":
            return value < self.value
        return value <= self.value if self.op == "<=" else value >= self.value

    def __str__(self) -> str:
        value = f"{self.value:g}" if self.value == int(self.value) else f"{self.value:.2f}"
        return f"{_SYMBOLS[self.op]} {value}{self.unit}"


_SYMBOLS = {"<": "<", "<=": "≤", ">=": "≥"}


@dataclass(frozen=True)
class Figure:
    """One quantity measured once per repetition. ``held_back`` says what holds it back,
    shown next to the verdict when a target is missed."""

    label: str
    samples: tuple[float, ...]
    unit: str = ""
    digits: int = 2
    target: Target | None = None
    held_back: str = ""
    #: Repetitions that were attempted; fewer samples means some runs failed.
    attempted: int = 0

    @property
    def valid(self) -> tuple[float, ...]:
        """The samples of the runs that produced one (failed runs are NaN)."""
        return tuple(s for s in self.samples if math.isfinite(s))

    @property
    def median(self) -> float | None:
        """The median of the valid samples; None without any."""
        valid = self.valid
        return statistics.median(valid) if valid else None

    def cell(self) -> str:
        """``1.03 (0.98–1.10)``, ``1.03`` for one sample, ``no data`` for none; the unit
        after the median, ``[2 of 3 runs]`` when some runs failed."""
        valid = self.valid
        if not valid:
            return "no data"
        median = statistics.median(valid)
        digits = self._digits(median)
        text = self._number(median, digits) + self.unit
        if len(valid) > 1:
            text += f" ({self._number(min(valid), digits)}–{self._number(max(valid), digits)})"
        missing = (self.attempted or len(self.samples)) - len(valid)
        if missing > 0:
            text += f" [{len(valid)} of {self.attempted or len(self.samples)} runs]"
        return text

    def _digits(self, median: float) -> int:
        """More digits when rounding would make a missed target look met (1.10 vs 1.1004)."""
        digits = self.digits
        while (self.target is not None and digits < 4
               and self.target.met(round(median, digits)) != self.target.met(median)):
            digits += 1
        return digits

    @staticmethod
    def _number(value: float, digits: int) -> str:
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"

    @property
    def met(self) -> bool | None:
        """None without a target or without data."""
        median = self.median
        if self.target is None or median is None:
            return None
        return self.target.met(median)

    def verdict(self) -> str:
        """``met``, ``**missed**: <why>``, ``no data``, or empty without a target."""
        if self.target is None:
            return ""
        if self.median is None:
            return "**no data**: every run of this figure failed (see the notes)"
        if self.met:
            return "met"
        return "**missed**" + (f": {self.held_back}" if self.held_back else "")


def ratios(pairs: Iterable[tuple[float | None, float | None]]) -> tuple[float, ...]:
    """``a / b`` for each pair measured in the same repetition; NaN where either is missing."""
    out = []
    for a, b in pairs:
        out.append(a / b if a is not None and b is not None and b > 0 else math.nan)
    return tuple(out)


def within_noise(samples: Iterable[float], target: Target) -> str:
    """When the repetitions fall on both sides of the target: a phrase saying so (the miss
    is not a difference these repetitions can resolve); else empty."""
    valid = [s for s in samples if math.isfinite(s)]
    if len(valid) < 2 or not min(valid) <= target.value <= max(valid):
        return ""
    return (f"the repetitions span {min(valid):.2f}–{max(valid):.2f}, on both sides of "
            f"{target.value:g}: the gap is within this shared machine's noise at "
            f"{len(valid)} repetitions")


def plural(count: int, noun: str) -> str:
    """``1 worker``, ``2 workers``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def values(samples: Iterable[float | None]) -> tuple[float, ...]:
    """Samples with None (a failed run) as NaN."""
    return tuple(math.nan if s is None else s for s in samples)


@dataclass
class Section:
    """One benchmark's part of BENCHMARKS.md."""

    title: str
    command: str
    intro: str
    tables: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    #: The run that produced it; None: this run, on this machine, now.
    stamp: Stamp | None = None

    def markdown(self, within_report: bool = False) -> str:
        """The section; ``within_report``: its figures come from the report's own command,
        so its standalone command is only mentioned."""
        stamp = self.stamp or Stamp.now()
        if within_report:
            parts = [f"## {self.title}", "", stamp.line(), "", f"On its own: `{self.command}`.", ""]
        else:
            parts = [f"## {self.title}", "", stamp.line(), "", "```sh", self.command, "```", ""]
        parts += [self.intro.strip(), ""]
        for table in self.tables:
            parts += [table, ""]
        targeted = [f for f in self.figures if f.target is not None]
        parts += target_lines(targeted)
        for note in self.notes:
            parts += [note.strip(), ""]
        return "\n".join(parts).rstrip() + "\n"


def target_lines(figures: Iterable[Figure]) -> list[str]:
    """A section's target lines, one a figure with a target, then a blank line: what the
    Targets table is built from (:func:`targets_table`)."""
    lines = [f"- {f.label}: {f.cell()}, target {f.target}: {f.verdict()}"
             for f in figures if f.target is not None]
    return [*lines, ""] if lines else []


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- the machine ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """What the figures were measured on."""

    cores: int
    cpu_model: str
    arch: str
    ram_gib: float
    python: str
    tensorflow: str
    textual: str
    autogroup: bool | None

    @classmethod
    def here(cls) -> Machine:
        """This machine."""
        return cls(cores=os.cpu_count() or 0, cpu_model=_cpu_model(), arch=platform.machine(),
                   ram_gib=psutil.virtual_memory().total / 2**30,
                   python=platform.python_version(), tensorflow=_tensorflow_version(),
                   textual=_version("textual"), autogroup=_autogroup())

    def describe(self) -> str:
        """One sentence for the report."""
        autogroup = {True: "on", False: "off", None: "unknown"}[self.autogroup]
        return (f"{self.cores} cores ({self.cpu_model}, {self.arch}), {self.ram_gib:.0f} GiB, no GPU "
                f"used; Python {self.python}, TensorFlow {self.tensorflow} (CPU), Textual "
                f"{self.textual}; Linux autogroup scheduling {autogroup}")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _tensorflow_version() -> str:
    """The installed TensorFlow's version, under whichever of its distribution names it came
    (a server's ``tensorflow-cpu`` reported "not installed" under the plain name)."""
    for name in DISTRIBUTIONS:
        version = _version(name)
        if version != "not installed":
            return version
    return "not installed"


def _autogroup() -> bool | None:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled", encoding="utf-8") as flag:
            return flag.read().strip() == "1"
    except OSError:
        return None


def load_average() -> str:
    """The 1-minute load average, a hint of how busy the shared machine was."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"


def run_footer(reps: int, started: float, load_at_start: float) -> str:
    """The closing line of a benchmark's table: repetitions, minutes, cores, and the machine's
    1-minute load average at its start and end (it is shared)."""
    return (f"{reps} repetitions, {(time.time() - started) / 60:.1f} minutes, {os.cpu_count()} cores; "
            f"1-minute load average {load_at_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
            "(the machine is shared).")


def replace_section(report: str, title: str, markdown: str) -> str:
    """``report`` with its ``## title`` section (up to the next ``## `` heading) replaced by
    ``markdown``, or with ``markdown`` appended when it has no such section."""
    lines = report.splitlines(keepends=True)
    heading = f"## {title}"
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        return report.rstrip("\n") + ("\n\n" if report.strip() else "") + markdown
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + markdown + ("\n" + tail if tail else "")


# -- the dated report -------------------------------------------------------------------------


@dataclass(frozen=True)
class Stamp:
    """The run a section's figures come from: its date, the machine, and how busy the
    machine was (it is shared). Written as the first line under the section's heading."""

    date: str
    machine: str
    load: str

    def line(self) -> str:
        """``Run: 2026-11-23 · machine: ... · load: ...``."""
        return f"Run: {self.date} · machine: {self.machine} · load: {self.load}"

    @classmethod
    def now(cls, load: str = "") -> Stamp:
        """Today, this machine, and ``load`` (else the 1-minute load average now)."""
        return cls(datetime.now(timezone.utc).strftime("%Y-%m-%d"), Machine.here().describe(),
                   load or f"1-minute load average {load_average()} at the end")

    @classmethod
    def parse(cls, line: str) -> Stamp | None:
        """The stamp ``line`` writes, or None."""
        match = _STAMP.fullmatch(line.strip())
        return cls(*match.groups()) if match else None


_STAMP = re.compile(r"Run: (\d{4}-\d{2}-\d{2}) · machine: (.+?) · load: (.+)")
#: A target line as :func:`target_lines` writes it.
_TARGET_LINE = re.compile(r"- (?P<label>.+): (?P<cell>[^:]+?), target (?P<target>[<≤≥] [^:]+): "
                          r"(?P<verdict>.+)")
TARGETS = "Targets"
#: Headings that are the report's own, not a benchmark's section.
NOT_SECTIONS = frozenset({TARGETS, "Failed runs"})
TARGETS_INTRO = ("Every target line of the sections below, with the date of the run that "
                 "measured it; built from them (`bench/harness/report.py`), so it cannot "
                 "disagree with them.")


def sections_of(report: str) -> list[tuple[str, str]]:
    """Each ``## `` section of ``report``: its title and its body (up to the next one)."""
    found: list[tuple[str, list[str]]] = []
    for line in report.splitlines():
        if line.startswith("## "):
            found.append((line[3:].strip(), []))
        elif found:
            found[-1][1].append(line)
    return [(title, "\n".join(body)) for title, body in found]


def stamp_of(body: str) -> Stamp | None:
    """The stamp of a section: its first non-empty line, if that is one."""
    first = next((line for line in body.splitlines() if line.strip()), "")
    return Stamp.parse(first)


def targets_table(report: str) -> str:
    """The Targets table of ``report``: every target line of its sections, in their order,
    with the section's number (or title) and the date of its run."""
    rows = []
    for title, body in sections_of(report):
        if title in NOT_SECTIONS:
            continue
        stamp = stamp_of(body)
        where = title.split(".", 1)[0] if title.split(".", 1)[0].isdigit() else title
        for line in body.splitlines():
            match = _TARGET_LINE.fullmatch(line.strip())
            if match:
                rows.append([where, stamp.date if stamp else "undated", match["label"],
                             match["cell"], match["target"], match["verdict"]])
    return table(["§", "measured", "figure", "median (min–max)", "target", "verdict"], rows)


def with_targets(report: str) -> str:
    """``report`` with its Targets section built afresh from its other sections, placed
    before the first of them when it had none."""
    block = f"## {TARGETS}\n\n{TARGETS_INTRO}\n\n{targets_table(report)}\n"
    if any(title == TARGETS for title, _ in sections_of(report)):
        return replace_section(report, TARGETS, block)
    lines = report.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    head = "".join(lines[:first]).rstrip("\n")
    rest = "".join(lines[first:])
    return (head + "\n\n" if head else "") + block + ("\n" + rest if rest else "")


def merge(existing: str, new: str) -> str:
    """``existing`` (a report) with ``new``'s heading part and sections in place of its own,
    its other sections kept (each with the stamp of its own run) and the Targets rebuilt."""
    new_sections = [(t, b) for t, b in sections_of(new) if t != TARGETS]
    titles = {t for t, _ in new_sections}
    kept = [(t, b) for t, b in sections_of(existing) if t not in NOT_SECTIONS or t in titles]
    head = new.split("\n## ", 1)[0].rstrip("\n") + "\n\n"
    text = head + "".join(f"## {t}\n{b.rstrip()}\n\n" for t, b in kept if t != TARGETS)
    for title, body in new_sections:
        text = replace_section(text, title, f"## {title}\n{body.rstrip()}\n")
    return with_targets(text.rstrip("\n") + "\n")


def write_section(path: Path, title: str, markdown: str) -> None:
    """Put one section (``markdown``, its heading included) into the report at ``path``,
    in place of its old one, and rebuild the Targets table."""
    existing = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    path.write_text(with_targets(replace_section(existing, title, markdown)), encoding="utf-8")
