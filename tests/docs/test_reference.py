"""The guide's reference pages say what the code does: the hosts.yaml tables list exactly
the keys the loader accepts (tui/config/), the app's page holds the key table made from
tui/app/controls.py, the troubleshooting page quotes every hint as the tool says it, and
the exit codes page names every code."""

from __future__ import annotations

import re
from pathlib import Path

from trainer.settings import FIELD_NAMES
from tui.app.controls import CONTROLS, key_table
from tui.common.exit_codes import ExitCode
from tui.config import load, network, resources, slurm
from tui.config.program import PROGRAM_KEYS
from tui.core import hints
from tui.core.slow_link import SlowLink

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: Each ``<!-- keys: NAME -->`` table of docs/hosts-yaml.md and the loader's keys for it.
SCHEMA: dict[str, tuple[str, ...]] = {
    "top": load._TOP_KEYS,
    "host": load._HOST_KEYS,
    "slurm": slurm.KEYS,
    "jobs": load._JOB_KEYS,
    "task": load._TASK_KEYS,
    "training": FIELD_NAMES,
    "restart": load._RESTART_KEYS,
    "network": network.KEYS,
    "program": PROGRAM_KEYS,
    "resources": resources._TOP_KEYS,
    "override": resources.OVERRIDE_KEYS,
}


def tables(text: str) -> dict[str, list[str]]:
    """The keys (first column, in backticks) of each marked table."""
    found: dict[str, list[str]] = {}
    for match in re.finditer(r"<!-- keys: (\w+) -->\n((?:\|.*\n)+)", text):
        rows = match.group(2).splitlines()[2:]  # past the header and its rule
        found[match.group(1)] = [m.group(1) for row in rows if (m := re.match(r"\| `([^`]+)` \|", row))]
    return found


def test_every_hosts_yaml_key_is_documented_and_no_other() -> None:
    documented = tables((DOCS / "hosts-yaml.md").read_text(encoding="utf-8"))
    assert set(documented) == set(SCHEMA)
    for name, keys in SCHEMA.items():
        assert sorted(documented[name]) == sorted(keys), f"table {name!r} of docs/hosts-yaml.md"


def test_the_table_reader_reads_tables() -> None:
    text = "<!-- keys: x -->\n| key | what |\n|---|---|\n| `a` | one |\n| a job | two |\n| `b` | three |\n"
    assert tables(text) == {"x": ["a", "b"]}


def test_the_app_page_lists_every_key_from_the_one_table() -> None:
    text = (DOCS / "app.md").read_text(encoding="utf-8")
    assert key_table() in text, "docs/app.md key table out of date: paste tui.app.controls.key_table()"
    for control in CONTROLS:
        assert f"| `{control.display}` |" in text


def test_troubleshooting_quotes_every_hint() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    quoted = re.findall(r"^> (.+)$", text, re.M)
    for known in hints.HINTS:
        assert known.hint in quoted, known.name
    assert hints.SIGKILL_HINT in quoted
    # The stall watchdog's hint (tui/core/supervisor/stall.py), and each policy's ending.
    assert any(line.startswith("stalled: no progress for ") for line in quoted)
    for said in ("kill -CONT it, or restart it (r)", "restarting it as the restart policy says",
                 "the run fails"):
        assert said in text
    # The slow-link watch's hint (tui/core/slow_link.py), with the figures the page shows.
    assert SlowLink("ps0", 418.4 * 1024, 7.2 * 2**20, 197, 5).text() in quoted


def test_the_exit_codes_page_names_every_code() -> None:
    text = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert f"| {code.value} | `{code.name}` |" in text
