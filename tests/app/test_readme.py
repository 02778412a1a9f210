"""The README's key table is the one made from tui.app.controls, and the README links nothing
outside a clone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tui.app.controls import CONTROLS, key_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_lists_every_key_from_the_one_table() -> None:
    text = README.read_text(encoding="utf-8")
    assert key_table() in text, "README key table out of date: paste tui.app.controls.key_table()"
    for control in CONTROLS:
        assert f"| `{control.display}` |" in text


def test_the_readme_names_nothing_a_reader_cannot_open() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text and "TF_NOTES" not in text and "seed 00" not in text
    for picture in ("tasks", "failed", "throughput", "placement", "help"):
        assert f"docs/screenshots/{picture}.svg" in text
        assert (README.parent / "docs" / "screenshots" / f"{picture}.svg").is_file()


async def test_the_screenshot_script_still_makes_the_readmes_pictures(tmp_path: Path) -> None:
    """``python docs/screenshots.py`` (the README says so) runs against today's modules."""
    path = README.parent / "docs" / "screenshots.py"
    spec = importlib.util.spec_from_file_location("screenshots", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.OUT = tmp_path
    await script.main()
    assert {p.name for p in tmp_path.iterdir()} == {f"{name}.svg" for name in
                                                   ("tasks", "failed", "throughput", "placement", "help")}
