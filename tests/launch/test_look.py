"""tui.launch.look: a copy's finding from the copies snippet's ``look`` answer, which the real
snippet gives here for folders of this machine (the same file system a host would have)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.launch.look import NAMED_FILES, CopyState, find_copies
from tui.launch.package import FolderPackage
from tui.launch.snippets import copies


def package(folder: Path, files: int = 1) -> FolderPackage:
    folder.mkdir()
    for k in range(files):
        (folder / f"f{k}.py").write_text(f"print({k})\n")
    return FolderPackage.from_directory(folder)


def place(work: Path, pkg: FolderPackage, source: Path) -> Path:
    """The copy as deploy leaves it: the files, then the marker listing them."""
    copy = work / pkg.dirname
    copy.mkdir(parents=True)
    for file in pkg.files:
        (copy / file.path).write_bytes((source / file.path).read_bytes())
    (copy / copies.MARKER).write_text(pkg.digest + "\n" + "".join(f"{f.path}\n" for f in pkg.files))
    return copy


def test_absent_present_and_changed(tmp_path: Path) -> None:
    pkg = package(tmp_path / "prog", files=NAMED_FILES + 2)
    work = tmp_path / "work"
    (absent,) = find_copies((pkg,), copies.look(str(work), [pkg.dirname]))
    assert absent.state is CopyState.UPLOAD and absent.ok and absent.size == pkg.size > 0
    assert absent.path == f"{work}/{pkg.dirname}"

    copy = place(work, pkg, tmp_path / "prog")
    (present,) = find_copies((pkg,), copies.look(str(work), [pkg.dirname]))
    assert present.state is CopyState.PRESENT and present.describe() == f"{copy} there"

    for file in pkg.files:
        (copy / file.path).write_text("edited\n")
    (changed,) = find_copies((pkg,), copies.look(str(work), [pkg.dirname]))
    assert changed.state is CopyState.CHANGED and not changed.ok
    assert "f0.py, f1.py, f2.py and 2 more differ" in changed.describe()
    (copy / "f0.py").unlink()  # a missing file is a difference too
    (missing,) = find_copies((pkg,), copies.look(str(work), [pkg.dirname]))
    assert missing.state is CopyState.CHANGED


def test_an_upload_that_would_fail_says_why(tmp_path: Path) -> None:
    pkg = package(tmp_path / "prog")
    answer = copies.look(str(tmp_path / "work"), [pkg.dirname])
    (no_sftp,) = find_copies((pkg,), answer, "the SSH server offers no SFTP")
    assert no_sftp.state is CopyState.CANNOT_UPLOAD
    assert no_sftp.detail == "the upload would fail: the SSH server offers no SFTP"
    (full,) = find_copies((pkg,), {**answer, "free": 1})
    assert full.state is CopyState.CANNOT_UPLOAD and "only 1 B free in" in full.detail


def test_an_answer_that_is_not_the_snippets_is_an_error() -> None:
    with pytest.raises(ValueError, match="the copies check gave no answer"):
        find_copies((), {"removed": []})
