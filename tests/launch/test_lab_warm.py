"""Warm pools over several real hosts (tests/support/netlab.py): every host starts its pool
while it is checked, all at once, and that pool's TensorFlow import is the host's only one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.launch.test_lab_runs import assert_hosts_empty
from tests.support.netlab_fixture import MakeLab
from tests.support.ssh import task
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.streams import each_line

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOSTS = 4
#: A stub TensorFlow whose import waits until every host's import has begun (each leaves a
#: file in BARRIER) and fails after 60 s: imports done one host after another never pass.
STUB_TF = """\
import os, time, uuid
open(os.path.join({barrier!r}, uuid.uuid4().hex), "w").close()
_deadline = time.time() + 60
while len(os.listdir({barrier!r})) < {count}:
    if time.time() > _deadline:
        raise ImportError("the other hosts' imports did not start within 60 s")
    time.sleep(0.05)
__version__ = "0.0+stub"
"""
#: What a trainer pool imports besides the package itself, and what it checks afterwards.
STUB_MODULES = {"compat/__init__.py": "", "compat/v1.py": "", "python/__init__.py": "",
                "python/eager/__init__.py": "", "python/eager/context.py": "_context = None\n"}


def stub_tf(folder: Path, barrier: Path, count: int) -> Path:
    package = folder / "tensorflow"
    for name, text in {"__init__.py": STUB_TF.format(barrier=str(barrier), count=count),
                       **STUB_MODULES}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return folder


async def test_every_host_imports_tensorflow_once_in_its_pool_all_at_once(netlab: MakeLab,
                                                                          tmp_path: Path) -> None:
    lab = netlab(HOSTS)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    stub = stub_tf(tmp_path / "stub", barrier, HOSTS)
    specs = [lab.host_spec(name, workdir=tmp_path / "work" / name, env={"PYTHONPATH": str(stub)})
             for name in lab.hosts]
    launcher = SSHLauncher(hosts={spec.name: spec for spec in specs})
    launcher.expect_pools("trainer")
    try:
        report = await asyncio.wait_for(launcher.connect_all(specs), 120)
        assert report.ok, report.failures
        assert [h.tf_version for h in report.hosts] == ["0.0+stub"] * HOSTS
        # One import per host (the pool's), and no probe imported it besides.
        assert len(list(barrier.iterdir())) == HOSTS

        # The pools are those the tasks start from: warm, with no import of their own.
        spec = specs[0]
        process = await launcher.start(task(), spec, [spec.interpreter, "-m", "trainer", "--help"],
                                       {"PYTHONUNBUFFERED": "1"}, spec.workdir)
        assert getattr(process, "warm", False), getattr(process, "launch_notice", "")
        lines = [line.text async for line in each_line(process.output())]
        assert await process.wait() == 0, lines
        assert any("usage:" in line for line in lines), lines
        assert len(list(barrier.iterdir())) == HOSTS
    finally:
        await launcher.close()
    assert_hosts_empty(lab)
