from __future__ import annotations

from pathlib import Path

import pytest

from tui.config.load import load_config
from tui.core.options import RunOptions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    return RunOptions(config=load_config(REPO / "hosts.yaml"), runs_root=tmp_path / "runs")
