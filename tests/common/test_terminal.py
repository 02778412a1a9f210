"""The one sanitiser (tui.common.terminal), and the attack it stops: a task that prints
escape sequences through the real controller, read back from a terminal (tmux with
``set-clipboard on``: an OSC 52 that got through would fill its paste buffer, an OSC 2 would
set the pane's title)."""

from __future__ import annotations

import io
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from textwrap import dedent

import pytest

from tests.support import wait_until
from tui.common.terminal import inert, is_inert, wants_colour, without_sequences

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]

ATTACKS = {
    "osc 52 clipboard, ST": ("a\x1b]52;c;UFdORUQ=\x1b\\b", "ab"),
    "osc 2 title, BEL": ("a\x1b]2;title\x07b", "ab"),
    "osc unterminated": ("a\x1b]2;title", "a"),
    "csi clear": ("\x1b[2J\x1b[Hz", "z"),
    "csi private mode": ("a\x1b[?1049hb", "ab"),
    "colour": ("\x1b[1;31mred\x1b[0m", "red"),
    "c1 csi": ("a\x9b2Jb", "ab"),
    "c1 osc with c1 st": ("a\x9d52;c;UFdORUQ=\x9cb", "ab"),
    "dcs": ("a\x1bP1$r\x1b\\b", "ab"),
    "two-character escape": ("a\x1bcb", "ab"),
    "lone escape": ("a\x1b", "a"),
    "bidi override": ("a\u202eb\u202cc", "abc"),
    "bidi isolates": ("\u2066a\u2067b\u2068c\u2069", "abc"),
    "zero width and bom": ("a\u200bb\ufeffc\u2028d", "abcd"),
    "c0 and del": ("a\x00b\x07c\x08d\x7fe\rf", "abcdef"),
    "tab kept": ("a\tb", "a\tb"),
    "text kept": ("é 日本 ✓ [/] 100%", "é 日本 ✓ [/] 100%"),
}


@pytest.mark.parametrize("case", ATTACKS)
def test_inert(case: str) -> None:
    text, expected = ATTACKS[case]
    assert inert(text) == expected
    assert is_inert(inert(text))


def test_newlines_kept_only_when_asked() -> None:
    assert inert("a\nb") == "ab"
    assert inert("a\n\x1b]52;c;eA==\x07b", newlines=True) == "a\nb"


def test_without_sequences_keeps_carriage_returns_for_parsers() -> None:
    assert without_sequences("1/3 \x1b[1m[==]\x1b[0m\r2/3") == "1/3 [==]\r2/3"


class PrivateTmux:
    """A tmux server of this test alone, with ``set-clipboard on`` from the first byte."""

    def __init__(self, tmp_path: Path, command: str) -> None:
        assert shutil.which("tmux"), "tmux is required"
        conf = tmp_path / "tmux.conf"
        conf.write_text("set -g set-clipboard on\n")
        self.socket = f"tfdist-{uuid.uuid4().hex[:8]}"
        self._tmux = ["tmux", "-L", self.socket, "-f", str(conf)]
        subprocess.run([*self._tmux, "new-session", "-d", "-s", "t", "-x", "200", "-y", "50", command],
                       check=True)

    def ask(self, *args: str) -> str:
        return subprocess.run([*self._tmux, *args], capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self.ask("capture-pane", "-p", "-t", "t", "-S", "-200")

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], capture_output=True)


def _hosts(tmp_path: Path) -> Path:
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(DATA / "hostile.py", folder / "hostile.py")
    hosts = folder / "hosts.yaml"
    hosts.write_text(dedent(f"""\
        program:
          command: {sys.executable} hostile.py {{job}}
          shim: false
        cluster: {{ps: [localhost:auto], worker: [localhost:auto]}}
        run_dir: {tmp_path / 'runs'}
        """))
    return hosts


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_task_cannot_drive_the_terminal_through_the_headless_controller(tmp_path: Path) -> None:
    hosts = _hosts(tmp_path)
    status = tmp_path / "status"
    command = (f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts))} --no-ui --restart never; echo $? > {shlex.quote(str(status))}; "
               f"sleep 60")
    tmux = PrivateTmux(tmp_path, f"sh -c {shlex.quote(command)}")
    try:
        title = tmux.ask("display", "-p", "-t", "t", "#{pane_title}")
        wait_until(status.exists, 90, what=tmux.screen)
        screen = tmux.screen()
        assert tmux.ask("list-buffers") == "", screen   # no OSC 52 reached the terminal
        assert tmux.ask("display", "-p", "-t", "t", "#{pane_title}") == title
        for mark in "ABCDEFGH":
            assert f"MARK-{mark}" in screen, f"MARK-{mark} missing (screen cleared?):\n{screen}"
        assert "MARK-F [/] [bold]not markup[/bold] text-f" in screen
        assert "MARK-G text-g [/]" in screen             # the error event's fields
        assert "desrever" in screen and "\u202e" not in screen
    finally:
        tmux.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_task_cannot_drive_the_terminal_through_the_app(tmp_path: Path) -> None:
    hosts = _hosts(tmp_path)
    command = (f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts))} --restart never")
    tmux = PrivateTmux(tmp_path, f"sh -c {shlex.quote(command)}")
    try:
        title = tmux.ask("display", "-p", "-t", "t", "#{pane_title}")
        wait_until(lambda: "MARK-G" in tmux.screen() and "run failed" in tmux.screen(), 90,
                   what=tmux.screen)
        screen = tmux.screen()
        assert tmux.ask("list-buffers") == "", screen
        assert tmux.ask("display", "-p", "-t", "t", "#{pane_title}") == title
        for mark in "ABCDEFG":
            assert f"MARK-{mark}" in screen, f"MARK-{mark} missing:\n{screen}"
        assert "MARK-F [/] [bold]not markup" in screen  # markup shown as text (a toast may cover the end)
    finally:
        tmux.close()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("no_color", "tty", "expected"), [
    (None, True, True), ("1", True, False), ("", True, False), (None, False, False),
])
def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch, no_color: str | None,
                                                    tty: bool, expected: bool) -> None:
    """NO_COLOR set at all, even empty, turns colour off, as Textual reads it for the app."""
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert wants_colour(_Terminal() if tty else io.StringIO()) is expected
