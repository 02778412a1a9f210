"""What ``tfdist-tui check`` learns of a host from its launcher, changing nothing there: what
the host offers (cores, GPUs: the same probe a run's preparation makes) and what a run would
find of its copies (the trainer package, a user's ``upload:`` folder): each one there and
matching what this controller would upload, or absent and uploadable, or a problem. The copies
are judged here from the copies snippet's ``look`` answer (:mod:`tui.launch.snippets.copies`);
a launcher that places copies (SSH) implements :class:`HostLooker`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from tui.common.units import format_bytes
from tui.config.cluster import HostSpec
from tui.launch.package import FolderPackage
from tui.launch.probe import HostResources

#: Changed files named in a copy's finding at most; the rest are counted.
NAMED_FILES = 3


class CopyState(Enum):
    """What a run would do with a copy."""

    PRESENT = "present"          # there, every file matching: used as it is
    UPLOAD = "upload"            # not there: it would be uploaded, and could be
    CHANGED = "changed"          # there, but files differ from what this controller has
    CANNOT_UPLOAD = "cannot upload"  # not there, and the upload would fail


@dataclass(frozen=True)
class CopyFinding:
    """One copy on one host: ``path`` is where the run would use it; ``detail`` says why
    it is a problem (empty when it is not)."""

    name: str
    path: str
    state: CopyState
    size: int
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state in (CopyState.PRESENT, CopyState.UPLOAD)

    def describe(self) -> str:
        """``trainer-0123456789ab there`` / ``... would be uploaded (312.0 KiB)`` / the problem."""
        if self.state is CopyState.PRESENT:
            return f"{self.path} there"
        if self.state is CopyState.UPLOAD:
            return f"{self.path} would be uploaded ({format_bytes(self.size)})"
        return f"{self.path}: {self.detail}"


def find_copies(packages: tuple[FolderPackage, ...], answer: object,
                sftp_problem: str | None = None) -> list[CopyFinding]:
    """Each package's finding from the ``look`` answer; ``sftp_problem`` is why an upload
    could not be made over this host's connection (None: it could). Raises ValueError for
    an answer that is not the snippet's."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("copies"), Mapping):
        raise ValueError(f"the copies check gave no answer ({answer!r:.200})")
    workdir = str(answer.get("workdir") or "")
    found: Mapping[str, object] = answer["copies"]
    free = answer.get("free")
    findings = []
    missing = sum(p.size for p in packages if not isinstance(found.get(p.dirname), Mapping))
    for package in packages:
        path = f"{workdir.rstrip('/')}/{package.dirname}"
        files = found.get(package.dirname)
        if isinstance(files, Mapping):
            changed = [f.path for f in package.files if files.get(f.path) != f.sha256]
            if not changed:
                findings.append(CopyFinding(package.name, path, CopyState.PRESENT, package.size))
                continue
            named = ", ".join(changed[:NAMED_FILES]) + (f" and {len(changed) - NAMED_FILES} more"
                                                        if len(changed) > NAMED_FILES else "")
            findings.append(CopyFinding(
                package.name, path, CopyState.CHANGED, package.size,
                f"{named} differ{'s' if len(changed) == 1 else ''} from this controller's copy, and the "
                f"run would use them as they are there; remove {path} and the run uploads it again"))
            continue
        why = sftp_problem
        if why is None and not answer.get("writable"):
            why = f"{answer.get('folder')} cannot hold it (not a folder this user may write to)"
        if why is None and isinstance(free, int) and free < missing:
            why = f"only {format_bytes(free)} free in {answer.get('folder')} for {format_bytes(missing)}"
        findings.append(CopyFinding(package.name, path, CopyState.CANNOT_UPLOAD if why else CopyState.UPLOAD,
                                    package.size, f"the upload would fail: {why}" if why else ""))
    return findings


@dataclass(frozen=True)
class HostLook:
    """What a host offers and what a run would find of its copies there."""

    resources: HostResources
    copies: tuple[CopyFinding, ...] = ()


@runtime_checkable
class HostLooker(Protocol):
    """A launcher that can tell, starting and placing nothing, what a host offers and what of
    its copies are there. Raises :class:`~tui.launch.base.LaunchError` when it cannot."""

    async def look(self, host: HostSpec) -> HostLook: ...
