"""The README is the front door: short, its two commands exactly as CI runs them, its
pictures real and present, a link to each way to run; the key table lives in the guide
(docs/app.md), made from tui.app.controls; and it links nothing outside a clone."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tui.app.controls import CONTROLS, key_table

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
#: Pictures of a real run (docs/real_screenshots.py) and scripted ones (docs/screenshots.py).
REAL = ("tasks", "all-logs", "placement", "throughput", "own-program")
SCRIPTED = ("tasks", "failed", "throughput", "placement", "help")


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "python -m pip install -e . && tfdist-tui hosts.yaml --no-ui\n" in text
    assert "python -m pip install -e '.[test]' && python -m pytest\n" in text
    assert "python -m pip install -q -e '.[test]' && python -m pytest" in (REPO / ".ci" / "run").read_text()
    for page in ("running", "ssh", "slurm", "own-program", "tf2", "hosts-yaml", "app", "troubleshooting",
                 "exit-codes"):
        assert f"](docs/{page}.md" in text, page
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        assert (REPO / link).exists(), link


def test_the_guide_lists_every_key_from_the_one_table() -> None:
    text = (REPO / "docs" / "app.md").read_text(encoding="utf-8")
    assert key_table() in text, "docs/app.md key table out of date: paste tui.app.controls.key_table()"
    for control in CONTROLS:
        assert f"| `{control.display}` |" in text


def test_the_readme_names_nothing_a_reader_cannot_open() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text and "TF_NOTES" not in text and "seed 00" not in text
    assert "docs/pictures/tasks.png" in text  # the picture on the front page: a real run
    assert (REPO / "docs" / "pictures" / "tasks.png").is_file()
    for picture in REAL:
        assert f"docs/pictures/{picture}.svg" in text or picture == "tasks"
        assert (REPO / "docs" / "pictures" / f"{picture}.svg").is_file()
    for picture in SCRIPTED:
        assert f"docs/screenshots/{picture}.svg" in text
        assert (REPO / "docs" / "screenshots" / f"{picture}.svg").is_file()


def test_the_real_pictures_show_a_real_run() -> None:
    """Not the scripted history (pids 1000-1003, worker0 step 360 lines): the trainer's own
    words and TensorFlow's version, as a run prints them."""
    tasks = (REPO / "docs" / "pictures" / "tasks.svg").read_text(encoding="utf-8")
    assert "1000" not in re.findall(r"pid\W+(\d+)", tasks)
    merged = (REPO / "docs" / "pictures" / "all-logs.svg").read_text(encoding="utf-8")
    assert "TensorFlow" in merged.replace("&#160;", " ")


async def test_the_screenshot_script_still_makes_the_scripted_pictures(tmp_path: Path) -> None:
    """``python docs/screenshots.py`` (the README says so) runs against today's modules."""
    path = REPO / "docs" / "screenshots.py"
    spec = importlib.util.spec_from_file_location("screenshots", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.OUT = tmp_path
    await script.main()
    assert {p.name for p in tmp_path.iterdir()} == {f"{name}.svg" for name in SCRIPTED}


def test_the_real_screenshot_script_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python docs/real_screenshots.py`` needs a real cluster (minutes): here, that it
    imports against today's modules and pictures what the README shows."""
    spec = importlib.util.spec_from_file_location("real_screenshots", REPO / "docs" / "real_screenshots.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # (its dataclass looks itself up there)
    spec.loader.exec_module(script)
    assert script.OUT == REPO / "docs" / "pictures"
