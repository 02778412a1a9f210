"""The user guide builds: ``mkdocs build --strict`` (mkdocs.yml), where any warning fails,
a broken link or anchor between pages included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(REPO / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_guide_builds_in_strict_mode(tmp_path: Path) -> None:
    result = build(tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    for page in ("hosts-yaml", "app", "troubleshooting", "benchmarks", "ssh", "slurm", "exit-codes"):
        assert (site / page / "index.html").is_file(), page
    # The benchmarks page holds BENCHMARKS.md's figures (docs/hooks.py puts them in).
    assert "Placement balance" in (tmp_path / "site" / "benchmarks" / "index.html").read_text()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Strict means strict: the same build with one link to a missing anchor fails."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(REPO / "docs"), str(docs)], check=True)
    for included in ("BENCHMARKS.md", "EXPERIMENTS.md"):  # (docs/hooks.py puts them in pages)
        (tmp_path / included).write_text((REPO / included).read_text())
    (docs / "index.md").write_text((docs / "index.md").read_text() + "\n[x](running.md#no-such-part)\n")
    config = (REPO / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace("  - docs/hooks.py", f"  - {docs / 'hooks.py'}")
    (tmp_path / "mkdocs.yml").write_text(config)
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                             str(tmp_path / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "no-such-part" in result.stderr
