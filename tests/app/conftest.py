from __future__ import annotations

from pathlib import Path

import pytest

from tui.config import load_config
from tui.options import RunOptions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    return RunOptions(config=load_config(REPO / "hosts.yaml"), runs_root=tmp_path / "runs")
