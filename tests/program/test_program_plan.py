"""What each task of a user's program runs: argv, placeholders, environment, TF_CONFIG, cwd;
the built-in trainer through the same interface; launchers by kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from trainer import protocol
from trainer.settings import Mode
from trainer.shim import BOOTSTRAP
from tui.config.cluster import ClusterConfig, HostKind, HostSpec, Job, TaskSpec
from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.launch.base import ConnectReport
from tui.launch.owner import RUN_ID_ENV
from tui.launch.package import FolderPackage, trainer_root, upload_package
from tui.launch.router import Router
from tui.plan.tasks import plan_run, program_for
from tui.program.base import PsEnding, Readiness, Setting
from tui.program.trainer import BuiltinTrainer
from tui.program.user import SHIM_ENV, UserProgram

PORTS = {"ps0": 2000, "worker0": 2001, "worker1": 2002, "chief0": 2003, "evaluator0": 2004}


def load(tmp_path: Path, text: str) -> ClusterConfig:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "hosts.yaml").write_text(dedent(text))
    return load_config(tmp_path / "hosts.yaml")


def test_flags_style_command_per_task(tmp_path: Path) -> None:
    config = load(tmp_path, """\
        program:
          command: >-
            python train.py --ps_hosts={ps_hosts} --worker_hosts={worker_hosts} --job_name={job}
            --task_index={index} --sync={sync} --steps={steps} --lr={lr} --ckpt={checkpoint_dir}
            --at={address}
        cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}
        training: {mode: sync, steps: 40, lr: 0.5}
        """)
    ps0, worker0, worker1 = plan_run(config, config.training, PORTS, "r1", run_dir=tmp_path / "runs" / "r1")
    assert worker1.argv == (sys.executable, "-c", BOOTSTRAP, "train.py",
                            "--ps_hosts=localhost:2000", "--worker_hosts=localhost:2001,localhost:2002",
                            "--job_name=worker", "--task_index=1", "--sync=true", "--steps=40", "--lr=0.5",
                            f"--ckpt={tmp_path / 'runs' / 'r1' / 'checkpoints'}", "--at=localhost:2002")
    assert ps0.argv[5:7] == ("--worker_hosts=localhost:2001,localhost:2002", "--job_name=ps")
    assert worker1.cwd == str(tmp_path)
    assert worker1.env[SHIM_ENV] == "1" and worker1.env[RUN_ID_ENV] == "r1"
    assert worker1.env["PYTHONPATH"].split(":")[:2] == [str(trainer_root()),
                                                        str(trainer_root() / "trainer" / "shim" / "userlib")]
    assert json.loads(worker0.env["TF_CONFIG"]) == {
        "cluster": {"ps": ["localhost:2000"], "worker": ["localhost:2001", "localhost:2002"]},
        "task": {"type": "worker", "index": 0}}
    assert worker1.shell_command.startswith(f"cd {tmp_path} && TF_CONFIG=")
    program = program_for(config)
    assert isinstance(program, UserProgram)
    assert (program.holds, program.readiness, program.ps_ending) == \
        (False, Readiness.SERVER, PsEnding.END_LINE)
    assert program.honours(Setting.MODE) and not program.honours(Setting.PARTITIONS)
    assert program.ignores(Setting.MODE) is None
    assert program.ignores(Setting.PLACEMENT) == \
        "placement is the built-in trainer's setting; your program decides its own"
    assert not program.previews_placement and program_for(config, hold=False) is not program


def test_tf_config_with_chief_and_evaluator_and_no_shim(tmp_path: Path) -> None:
    config = load(tmp_path, """\
        program: {command: [python3, -u, train.py, "{{literal}}"], shim: false}
        cluster: {ps: [localhost:auto], worker: [localhost:auto], chief: [localhost:auto],
                  evaluator: [localhost:auto]}
        """)
    plans = {p.name: p for p in plan_run(config, config.training, PORTS, "r2")}
    cluster = {"chief": ["localhost:2003"], "ps": ["localhost:2000"], "worker": ["localhost:2001"]}
    for name, kind in (("chief0", "chief"), ("evaluator0", "evaluator"), ("worker0", "worker")):
        assert json.loads(plans[name].tf_config) == {"cluster": cluster, "task": {"type": kind, "index": 0}}
    assert plans["chief0"].argv == (sys.executable, "-u", "train.py", "{literal}")
    assert SHIM_ENV not in plans["chief0"].env
    program = program_for(config)
    assert program.ps_ending is PsEnding.STOP
    assert not program.honours(Setting.MODE) and not program.honours(Setting.PARTITIONS)
    assert program.ignores(Setting.MODE) == \
        "the program's command uses neither {mode} nor {sync}, so changing mode changes nothing"
    assert program.ignores(Setting.PARTITIONS) == \
        "the program's command uses no {partitions}, so changing partitions changes nothing"


def test_remote_hosts_run_in_the_uploaded_folder_with_their_python(tmp_path: Path) -> None:
    config = load(tmp_path, """\
        hosts: {gpu1: {address: 10.0.0.5, python: /opt/tf/bin/python, workdir: /srv/tf}}
        program:
          command: python train.py --run={run_dir} --sum={summary_dir} --p={partitions}
          upload: .
        cluster: {ps: [localhost:auto], worker: [gpu1:2001]}
        training: {partitions: 3}
        """)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "log.txt").write_text("not uploaded")
    ps0, worker0 = plan_run(config, config.training, PORTS, "r3", run_dir=tmp_path / "runs" / "r3")
    package = upload_package(tmp_path, exclude=(config.run_dir,))
    assert {f.path for f in package.files} == {"hosts.yaml", "train.py"}
    assert worker0.cwd == f"/srv/tf/{package.dirname}"
    assert worker0.argv == ("/opt/tf/bin/python", "-c", BOOTSTRAP, "train.py", "--run=../runs/r3",
                            "--sum=../runs/r3/tensorboard", "--p=3")
    assert "PYTHONPATH" not in worker0.env  # the SSH launcher puts its deployed trainer there
    assert ps0.argv[-3] == f"--run={tmp_path / 'runs' / 'r3'}"
    # An edit changes the folder's name, so a relaunch runs the new files.
    (tmp_path / "train.py").write_text("print('changed')\n")
    assert upload_package(tmp_path, exclude=(config.run_dir,)).digest != package.digest
    assert FolderPackage.from_directory(tmp_path, exclude=(config.run_dir,)).digest != package.digest


def test_the_builtin_trainer_behind_the_interface(tmp_path: Path) -> None:
    tasks = (TaskSpec(Job.PS, 0, "box", 1), TaskSpec(Job.WORKER, 0, "far", 2))
    hosts = {"box": HostSpec(name="box", address="127.0.0.1", kind=HostKind.LOCAL),
             "far": HostSpec(name="far", address="10.0.0.1")}
    config = ClusterConfig(path=tmp_path / "h.yaml", hosts=hosts, tasks=tasks,
                           training=load(tmp_path, "cluster: {ps: [a:1], worker: [a:2]}").training)
    program = program_for(config)
    assert isinstance(program, BuiltinTrainer) and program.holds
    assert (program.readiness, program.ps_ending) == (Readiness.EVENT, PsEnding.EXITS)
    box, far = plan_run(config, config.training, {"ps0": 1, "worker0": 2}, "r4", run_dir=tmp_path / "r4")
    # kind: local runs here: no python: written, so the controller's own interpreter; local paths.
    assert box.argv[:4] == (sys.executable, "-m", "trainer", protocol.HOLD_FLAG)
    assert box.cwd is None and "PYTHONPATH" in box.env
    assert far.cwd == "~/tfdist" and "PYTHONPATH" not in far.env
    assert far.shell_command.startswith("cd ~/tfdist && TF_CONFIG=")
    event = protocol.Ready(role="ps", index=0, pid=3, address="a:1")
    assert program.reader(tasks[0]).read(event.to_json(), 0.0) == [event]
    assert program.reader(tasks[0]).read("Started server with target: grpc://a:1", 0.0) == []


def test_user_program_reader_turns_tf_server_lines_into_ready(tmp_path: Path) -> None:
    config = load(tmp_path, """\
        program: {command: python train.py, batch_size: 10, shim: false}
        cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}
        """)
    # (Under the shim its own ready event says it, and this line stays text: test_figures.py.)
    reader = program_for(config).reader(config.tasks[0])
    line = "2026-01-01 I tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc:475] Started server " \
           "with target: grpc://localhost:2000"
    (ready,) = reader.read(line, 5.0)
    assert isinstance(ready, protocol.Ready) and (ready.task, ready.address) == ("ps0", "localhost:2000")
    (step,) = reader.read("INFO:tensorflow:loss = 0.5, step = 7 (0.1 sec)", 6.0)
    assert isinstance(step, protocol.Step) and (step.task, step.global_step, step.loss) == ("ps0", 7, 0.5)
    # The shim's steps measure the global step's pace: the batch size makes it examples/sec,
    # all of the batch per step in sync mode, a worker's share (of 2) in async mode.
    shim_step = protocol.Step(role="worker", index=0, global_step=9, local_step=9, loss=None,
                              examples_per_sec=0.0, step_time=0.5)
    for mode, expected in (("sync", 20.0), ("async", 10.0)):
        settings = config.training.replace(mode=Mode(mode))
        (converted,) = program_for(config).reader(config.tasks[1], settings).read(shim_step.to_json(), 7.0)
        assert isinstance(converted, protocol.Step) and converted.examples_per_sec == expected


class _Recorder:
    """A launcher stand-in that records which hosts it was asked to connect."""

    def __init__(self) -> None:
        self.connected: list[str] = []

    async def connect_all(self, hosts: object) -> ConnectReport:
        self.connected += [h.name for h in hosts]  # type: ignore[attr-defined]
        return ConnectReport(warnings=("w",))

    async def close(self) -> None:
        return None


async def test_the_router_dispatches_by_kind() -> None:
    local, remote = _Recorder(), _Recorder()
    router = Router(local=local, remote=remote)  # type: ignore[arg-type]
    hosts = [HostSpec(name="localhost", address="localhost"), HostSpec(name="a", address="a"),
             HostSpec(name="localhost", address="127.0.0.1", kind=HostKind.SSH),
             HostSpec(name="b", address="b", kind=HostKind.LOCAL)]
    report = await router.connect_all(hosts)
    assert remote.connected == ["a", "localhost"] and local.connected == []
    assert report.warnings == ("w",)
    assert router.launcher(HostKind.LOCAL) is local and router.launcher(HostKind.SSH) is remote
    await router.close()


def test_module_form_runs_under_the_shim_and_a_missing_module_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("")
    (tmp_path / "trainer" / "task.py").write_text("")
    config = load(tmp_path, """\
        program: {command: "python -u -m trainer.task --job={job}"}
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        """)
    _, worker0 = plan_run(config, config.training, PORTS, "r4")
    assert worker0.argv == (sys.executable, "-u", "-c", BOOTSTRAP, "-m", "trainer.task", "--job=worker")
    assert program_for(config).ps_ending is PsEnding.END_LINE
    (tmp_path / "hosts.yaml").write_text("program: {command: python -m trainer.tsk}\n"
                                         "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:1:30: program.command: module 'trainer.tsk' "
                                          r"does not exist in .*; did you mean 'trainer.task'\?"):
        load_config(tmp_path / "hosts.yaml")


def test_a_training_key_nobody_uses_is_a_typo(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "hosts.yaml").write_text("program: {command: 'python train.py --steps={steps}'}\n"
                                         "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n"
                                         "training: {setps: 500, learning_rate: 0.1}\n")
    with pytest.raises(ConfigError, match=r"hosts.yaml:3:12: training: 'setps' is neither a setting nor "
                                          r"used in program.command as \{setps\}; did you mean 'steps'\?"):
        load_config(tmp_path / "hosts.yaml")
