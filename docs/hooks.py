"""MkDocs hook (mkdocs.yml ``hooks:``): pages that show a file of the repository's root,
which lives there because tools write it (``python -m bench`` writes BENCHMARKS.md). A page
line ``<!-- include ../NAME.md -->`` is replaced by that file, its headings one level down."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_INCLUDE = re.compile(r"^<!-- include \.\./([\w.-]+\.md) -->$", re.M)


def _included(match: re.Match[str]) -> str:
    lines, fenced = [], False
    for line in (ROOT / match.group(1)).read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        lines.append("#" + line if not fenced and re.match(r"#+ ", line) else line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Put each included file in place of its marker."""
    return _INCLUDE.sub(_included, markdown)
