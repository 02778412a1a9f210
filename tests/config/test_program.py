"""The ``program:`` section: what loads, and a located ConfigError for every mistake."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from trainer.settings import Mode
from tui.config.cluster import HostKind, Job
from tui.config.load import load_config
from tui.config.program_spec import MetricField
from tui.config.yamlload import ConfigError

CLUSTER = "cluster: {ps: [localhost:auto], worker: [localhost:auto, localhost:auto]}\n"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "train.py").write_text("print('hello')\n")
    path = tmp_path / "hosts.yaml"
    path.write_text(dedent(text))
    return path


def test_a_full_program_section_loads(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hello')\n")  # remote tasks run the copy's
    config = load_config(write(tmp_path, """\
        program:
          command: python -u train.py --job_name={job} --task_index={index} --lr={learning_rate}
          upload: src
          batch_size: 32
          metrics: ['Step: (?P<step>\\d+).*Cost: (?P<loss>[0-9.]+)']
          shim: false
        cluster: {ps: [localhost:auto], chief: [localhost:auto], worker: [localhost:auto],
                  evaluator: [localhost:auto]}
        training: {mode: sync, partitions: 2, steps: 50, learning_rate: 0.10, model: my_resnet}
        """))
    program = config.program
    assert program is not None
    assert program.command == ("python", "-u", "train.py", "--job_name={job}", "--task_index={index}",
                               "--lr={learning_rate}")
    assert program.upload == tmp_path / "src"
    assert program.batch_size == 32 and program.shim is False
    assert program.metrics[0].fields == {MetricField.STEP, MetricField.LOSS}
    # Driven settings keep their meaning; everything else is text as written.
    assert (config.training.mode, config.training.partitions, config.training.steps) == (Mode.SYNC, 2, 50)
    assert program.values == {"learning_rate": "0.10", "model": "my_resnet"}
    assert [t.name for t in config.tasks] == ["ps0", "worker0", "chief0", "evaluator0"]
    assert config.chief.job is Job.CHIEF
    assert program.placeholders == {"job", "index", "learning_rate"}


def test_a_yaml_list_command_and_no_chief(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, CLUSTER + 'program: {command: [python, train.py, "--x={ps_hosts}", '
                                                    '"two words"]}\n'))
    assert config.program is not None
    assert config.program.command == ("python", "train.py", "--x={ps_hosts}", "two words")
    assert config.chief.name == "worker0"
    assert config.program.shim is True


@pytest.mark.parametrize("command", [
    "TF_USE_LEGACY_KERAS=1 CKPT={checkpoint_dir} python train.py --steps={steps}",
    "env TF_USE_LEGACY_KERAS=1 CKPT={checkpoint_dir} python train.py --steps={steps}",
    "[TF_USE_LEGACY_KERAS=1, 'CKPT={checkpoint_dir}', python, train.py, '--steps={steps}']",
])
def test_variables_assigned_before_the_program_are_its_environment(tmp_path: Path, command: str) -> None:
    # As a shell takes them: the program is python (the host's, under the shim), not the
    # first assignment (nor, after env, whichever python PATH finds first).
    config = load_config(write(tmp_path, CLUSTER + f"program:\n  command: {command}\n"))
    assert config.program is not None
    assert config.program.command == ("python", "train.py", "--steps={steps}")
    assert config.program.env == {"TF_USE_LEGACY_KERAS": "1", "CKPT": "{checkpoint_dir}"}
    assert config.program.placeholders == {"checkpoint_dir", "steps"}
    assert config.program.written == ("TF_USE_LEGACY_KERAS=1 CKPT={checkpoint_dir} python train.py "
                                      "--steps={steps}")


def test_hosts_kind_is_explicit_or_inferred(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, CLUSTER + dedent("""\
        hosts:
          localhost: {kind: ssh, port: 2200}
          box: {address: 127.0.0.1, kind: local}
          gpu1: {address: 10.0.0.1}
        """)))
    assert config.hosts["localhost"].launch_kind is HostKind.SSH and not config.hosts["localhost"].is_local
    assert config.hosts["box"].is_local
    assert config.hosts["gpu1"].launch_kind is HostKind.SSH


# (text after the cluster line, line, column, message fragment)
ERRORS = [
    ("program:\n  command: python train.py --a={nope}\n", 3, 32, "unknown placeholder {nope}"),
    ("program:\n  command: python train.py --a={stesp}\n", 3, 32, "did you mean {steps}?"),
    ("program:\n  command: [python, train.py, '{job', x]\n", 3, 32, "program.command"),
    ("program:\n  command: python train.py --s={steps:05d}\n", 3, 32, "no format"),
    ("program:\n  command: python missing.py --a=1\n", 3, 19, "script 'missing.py' does not exist"),
    ("program:\n  command: ./run.sh\n", 3, 12, "program './run.sh' does not exist"),
    ("program:\n  command: ''\n", 3, 3, "empty command"),
    ("program:\n  command: []\n", 3, 3, "empty command"),
    ("program:\n  command:\n", 3, 3, "empty command"),
    ("program:\n  command: python 'train.py\n", 3, 12, "cannot be split"),
    ("program:\n  upload: .\n", 2, 1, "missing key 'command'"),
    ("program:\n  command: python train.py\n  shim: maybe\n", 4, 9, "expected true or false"),
    ("program:\n  command: python train.py\n  batch_size: 0\n", 4, 15, "whole number >= 1"),
    ("program:\n  command: python train.py\n  upload: nothere\n", 4, 11, "is not a folder"),
    ("program:\n  command: python train.py\n  metrics: ['(?P<step>\\d+']\n", 4, 13,
     "not a valid regular expression: missing ), unterminated subpattern at character 1"),
    ("program:\n  command: python train.py\n  metrics: ['step (\\d+)']\n", 4, 13, "no named group"),
    ("program:\n  command: python train.py\n  metrics: ['(?P<epoch>\\d+)']\n", 4, 13,
     "unknown group name 'epoch'"),
    ("program:\n  command: python train.py\n  colour: red\n", 4, 3, "unknown key 'colour' in program"),
    ("program:\n  command: python train.py\ntraining: {mode: fast}\n", 4, 18, "training.mode"),
    ("program:\n  command: python train.py\ntraining: {steps: 0}\n", 4, 19, "training.steps"),
    ("program:\n  command: python train.py\ntraining: {lr: [1, 2]}\n", 4, 16, "expected a single value"),
    ("program: python train.py\n", 2, 10, "expected a mapping"),
    ("program:\n  command: TF_USE_LEGACY_KERAS=1 python trian.py\n", 3, 41,
     "script 'trian.py' does not exist"),
    ("program:\n  command: A=1 TF_CONFIG={{}} python train.py\n", 3, 16, "TF_CONFIG is set by tfdist-tui"),
    ("program:\n  command: A={bad} python train.py\n", 3, 14, "unknown placeholder {bad}"),
    ("program:\n  command: A=1 B=2\n", 3, 16, "'B=2' sets a variable but no program follows"),
    ("program:\n  command: venv/bin/python train.py\n", 3, 12, "program 'venv/bin/python' does not exist"),
    ("program:\n  command: /usr/bin/python3 missing.py\n", 3, 29, "script 'missing.py' does not exist"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), ERRORS)
def test_bad_program_values_are_located(tmp_path: Path, text: str, line: int, column: int,
                                        message: str) -> None:
    path = write(tmp_path, CLUSTER + text)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    error = raised.value
    assert message in error.message
    assert (error.line, error.column) == (line, column), str(error)


@pytest.mark.parametrize(("cluster", "line", "column", "message"), [
    ("cluster: {ps: [localhost:auto], worker: [localhost:auto], chief: [localhost:auto]}\n", 1, 59,
     "a chief job needs a program: section"),
    ("cluster: {ps: [localhost:auto], worker: [localhost:auto], evaluator: [localhost:auto]}\n", 1, 59,
     "an evaluator job needs a program"),
    ("cluster: {ps: [localhost:auto], worker: [localhost:auto]}\nhosts: {gpu1: {kind: k8s}}\n", 2, 22,
     "expected one of local, ssh, slurm, got 'k8s'"),
])
def test_jobs_and_kinds_without_a_program(tmp_path: Path, cluster: str, line: int, column: int,
                                          message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, cluster))
    assert message in raised.value.message
    assert (raised.value.line, raised.value.column) == (line, column), str(raised.value)


def test_two_chiefs_and_a_chief_with_no_workers(tmp_path: Path) -> None:
    program = "program: {command: python train.py}\n"
    with pytest.raises(ConfigError, match="one chief at most"):
        load_config(write(tmp_path, "cluster: {ps: [localhost:auto], chief: [localhost:auto, "
                                    "localhost:auto]}\n" + program))
    config = load_config(write(tmp_path, "cluster: {ps: [localhost:auto], chief: [localhost:auto]}\n"
                               + program))
    assert [t.name for t in config.tasks] == ["ps0", "chief0"]
    with pytest.raises(ConfigError, match="at least one worker"):
        load_config(write(tmp_path, "cluster: {ps: [localhost:auto]}\n" + program))


@pytest.mark.parametrize(("module", "message"), [
    ("pkg/train", "-m takes a module's dotted name, not a path; did you mean 'pkg.train'?"),
    ("pkg/train.py", "did you mean 'pkg.train'?"),
    ("pgk.train", "no package 'pgk' in"),
    ("trainpkg.train", "and none installed for this Python"),
    ("pkg.trian", "module 'pkg.trian' does not exist in"),
])
def test_a_module_that_will_not_be_found_is_a_config_error(tmp_path: Path, module: str, message: str) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("")
    path = write(tmp_path, CLUSTER + f"program:\n  command: python -m {module} --steps={{steps}}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert message in raised.value.message
    assert (raised.value.line, raised.value.column) == (3, 22), str(raised.value)
    if module == "pgk.train":
        assert "did you mean 'pkg.train'?" in raised.value.message


def test_an_installed_module_or_one_on_a_remote_host_is_left_to_them(tmp_path: Path) -> None:
    path = write(tmp_path, CLUSTER + "program:\n  command: python -m json.tool --help\n")
    assert load_config(path).program is not None  # installed for this Python
    remote = ("hosts: {far: {address: 10.0.0.9}}\n"
              "cluster: {ps: ['far:2222'], worker: ['far:2223']}\n"
              "program:\n  command: python -m trainpkg.train\n")
    assert load_config(write(tmp_path, remote)).program is not None  # installed there, maybe


def test_an_evaluator_is_restarted_by_default_and_follows_restart_on_the_command_line(tmp_path: Path) -> None:
    from tui.config.cluster import RestartMode
    from tui.config.load import with_restart_mode

    text = ("cluster: {ps: [localhost:auto], chief: [localhost:auto], worker: [localhost:auto],"
            " evaluator: [localhost:auto]}\nprogram:\n  command: python train.py\n")
    config = load_config(write(tmp_path, text))
    assert config.restart_policy(Job.WORKER).policy is RestartMode.NEVER
    assert config.restart_policy(Job.EVALUATOR).policy is RestartMode.ON_FAILURE
    never = with_restart_mode(config, RestartMode.NEVER)
    assert never.restart_policy(Job.EVALUATOR).policy is RestartMode.NEVER


PSS_SCRIPT = """\
import tensorflow as tf

# A TF2 program: the chief coordinates, the ps and workers serve.
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
"""


@pytest.mark.parametrize("command", ["python train.py --steps={steps}", "python -m pkg.train"])
def test_a_parameter_server_strategy_program_without_a_chief_is_a_config_error(tmp_path: Path,
                                                                               command: str) -> None:
    path = write(tmp_path, CLUSTER + f"program:\n  command: {command}\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for script in (tmp_path / "train.py", tmp_path / "pkg" / "train.py"):
        script.write_text(PSS_SCRIPT)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert (raised.value.line, raised.value.column) == (1, 1), str(raised.value)  # at cluster:
    where = "train.py:5:12" if command.startswith("python train") else "pkg/train.py:5:12"
    assert f"constructs a ParameterServerStrategy ({where})" in raised.value.message
    assert "no chief: job" in raised.value.message
    # With a chief it loads; a TF1 program that only names the strategy is no PSS program.
    chief = tmp_path / "chief.yaml"
    chief.write_text(CLUSTER.replace("worker:", "chief: [localhost:auto], worker:") +
                     f"program:\n  command: {command}\n")
    assert load_config(chief).program is not None
    for script in (tmp_path / "train.py", tmp_path / "pkg" / "train.py"):
        script.write_text("# not a ParameterServerStrategy() program: replica_device_setter\n"
                          "print('ParameterServerStrategy(')\n")
    assert load_config(path).program is not None


@pytest.mark.parametrize("command", ["python train.py", "python -m pkg.train"])
def test_a_strategy_built_in_a_module_of_the_program_s_own_is_found(tmp_path: Path, command: str) -> None:
    path = write(tmp_path, CLUSTER + f"program:\n  command: {command}\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    # The entry imports its helpers as users write them: absolute, relative, a package's
    # module; the helpers import each other (a cycle) and installed modules (not followed).
    entry = ("import os\nimport tensorflow as tf\nfrom {rel}common import flags\n"
             "from {pkg} import setup\nstrategy = setup.make()\n")
    (tmp_path / "train.py").write_text(entry.format(rel="pkg.", pkg="pkg"))
    (tmp_path / "pkg" / "train.py").write_text(entry.format(rel=".", pkg="."))
    (tmp_path / "pkg" / "common.py").write_text("from pkg import setup\nflags = 1\n")
    (tmp_path / "pkg" / "setup.py").write_text(
        "from pkg import common\nimport tensorflow as tf\n\n\ndef make():\n"
        "    return tf.distribute.ParameterServerStrategy(None)\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "constructs a ParameterServerStrategy (pkg/setup.py:6:12)" in raised.value.message
    # A helper that only names it is no PSS program.
    (tmp_path / "pkg" / "setup.py").write_text("def make():\n    return 'ParameterServerStrategy()'\n")
    assert load_config(path).program is not None


def test_a_missing_script_fails_with_exit_2_before_any_host_is_contacted(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "hosts.yaml").write_text(dedent("""\
        hosts:
          far: {address: 192.0.2.1}
        program:
          command: python missing.py --address={address}
          shim: false
        cluster:
          ps: [far:2222]
          worker: [far:2223]
        """))
    result = subprocess.run([sys.executable, "-m", "tui", str(tmp_path / "hosts.yaml"), "--no-ui", "--json"],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "program.command: script 'missing.py' does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    # Not one host was shown being prepared (192.0.2.1 answers nothing: it would have been).
    assert '"type":"hosts"' not in result.stdout
