"""``tfdist-tui export`` and ``import``: TFJob manifests checked against TFJob v1's fields,
TF_CONFIGs equal to the controller's own plan, and round trips back to an equivalent
hosts.yaml. No processes but ``sh`` (the per-replica command script)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tui import cli
from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig, Job, RestartMode
from tui.config.load import load_config
from tui.interop.export import export_plans, export_ports, shell_script, tf_config_lines
from tui.interop.tfjob import TFJobOptions, kubernetes_plans, tfjob_manifest
from tui.interop.tfjob_schema import REPLICA_TYPES
from tui.plan.tasks import CONTROLLER_ONLY_ENV, TaskPlan, plan_run
from tui.program.user import SHIM_ARGV

# TFJob v1 (kubeflow.org/v1): the replica types and restart policies the operator accepts.
TFJOB_REPLICA_TYPES = {"PS", "Worker", "Chief", "Master", "Evaluator"}
TFJOB_RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}
# The fields of the TFJob v1 CRD (kubeflow/training-operator) at each level we write.
TFJOB_SPEC_FIELDS = {"enableDynamicWorker", "runPolicy", "successPolicy", "tfReplicaSpecs"}
TFJOB_RUN_POLICY_FIELDS = {"activeDeadlineSeconds", "backoffLimit", "cleanPodPolicy", "schedulingPolicy",
                           "suspend", "ttlSecondsAfterFinished"}
TFJOB_CLEAN_POD_POLICIES = {"All", "Running", "None"}
TFJOB_REPLICA_FIELDS = {"replicas", "restartPolicy", "template"}
# Of Kubernetes' core/v1 Container, the fields a TFJob's container uses.
CONTAINER_FIELDS = {"name", "image", "command", "args", "env", "ports", "resources", "workingDir"}

HOSTS = """\
hosts:
  gpu1: {address: 10.1.2.3, port: 2200, user: train, jump: bastion}
  bastion: {address: 10.1.0.1, user: me}
cluster:
  ps: [localhost:auto, localhost:2222]
  worker:
    - localhost:auto
    - {host: gpu1, port: 2222, gpus: 2}
    - gpu1:auto
training: {model: softmax, mode: sync, steps: 50, batch_size: 32, partitions: 2}
restart:
  policy: never
  worker: {policy: on-failure, max_restarts: 2}
"""


@pytest.fixture
def config(tmp_path: Path) -> ClusterConfig:
    path = tmp_path / "my_cluster.yaml"
    path.write_text(HOSTS)
    return load_config(path)


def fake_python(tmp_path: Path) -> Path:
    """A folder with a ``python`` that prints its arguments, one per line."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (folder / "python").chmod(0o755)
    return folder


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_tfjob_manifest_has_tfjob_v1_fields(config: ClusterConfig, tmp_path: Path) -> None:
    manifest = tfjob_manifest(config, TFJobOptions("my-job", "team", "registry/tf:1"))
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "TFJob")
    assert manifest["metadata"] == {"name": "my-job", "namespace": "team"}
    assert set(manifest["spec"]) <= TFJOB_SPEC_FIELDS
    assert set(manifest["spec"]["runPolicy"]) <= TFJOB_RUN_POLICY_FIELDS
    assert manifest["spec"]["runPolicy"]["cleanPodPolicy"] in TFJOB_CLEAN_POD_POLICIES
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert all(set(spec) <= TFJOB_REPLICA_FIELDS for spec in specs.values())
    assert set(specs) <= TFJOB_REPLICA_TYPES and set(specs) == {"PS", "Worker"}
    assert {t: s["replicas"] for t, s in specs.items()} == {"PS": 2, "Worker": 3}
    assert {t: s["restartPolicy"] for t, s in specs.items()} == {"PS": "Never", "Worker": "OnFailure"}
    assert all(s["restartPolicy"] in TFJOB_RESTART_POLICIES for s in specs.values())
    # backoffLimit counts restarts of the whole job: 2 per worker.
    assert manifest["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 6}
    for spec in specs.values():
        (container,) = spec["template"]["spec"]["containers"]
        assert set(container) <= CONTAINER_FIELDS
        assert container["name"] == "tensorflow" and container["image"] == "registry/tf:1"
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        assert all(isinstance(word, str) for word in container["command"])
        assert "TF_CONFIG" not in {e["name"] for e in container.get("env", [])}
        # Whose run, whose controller, who holds the port: nothing outside our controller.
        assert not {e["name"] for e in container.get("env", [])} & CONTROLLER_ONLY_ENV
    ps = specs["PS"]["template"]["spec"]["containers"][0]
    assert ps["command"][:3] == ["python", "-m", "trainer"] and "--hold" not in ps["command"]
    assert "resources" not in ps
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    # The YAML written is the same manifest.
    out = tmp_path / "job.yaml"
    assert cli.main(["export", str(config.path), "--name", "my-job", "--namespace", "team",
                     "--image", "registry/tf:1", "-o", str(out)]) == ExitCode.OK
    assert yaml.safe_load(out.read_text()) == manifest


def test_replicas_with_different_commands_pick_theirs_by_host_name(config: ClusterConfig,
                                                                   tmp_path: Path) -> None:
    """worker1 has gpus: 2, the others the default: one script, each pod runs its own argv."""
    options = TFJobOptions("my-job", "team")
    worker = tfjob_manifest(config, options)["spec"]["tfReplicaSpecs"]["Worker"]
    command = worker["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"]
    fake = fake_python(tmp_path)
    plans = [p for p in kubernetes_plans(config, options) if p.spec.job is Job.WORKER]
    for plan in plans:
        env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
               "HOSTNAME": f"my-job-worker-{plan.spec.index}"}
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=10, check=True)
        assert result.stdout.splitlines() == list(plan.argv[1:])
    assert plans[1].argv[plans[1].argv.index("--gpus") + 1] == "2"


def test_kubernetes_tf_config_is_the_operators(config: ClusterConfig) -> None:
    """The operator names each replica's service <job>-<type>-<index>.<namespace>.svc:port."""
    def addresses(kind: str, n: int) -> list[str]:
        return [f"my-job-{kind}-{i}.team.svc:2222" for i in range(n)]

    for plan in kubernetes_plans(config, TFJobOptions("my-job", "team")):
        assert json.loads(plan.tf_config) == {
            "cluster": {"ps": addresses("ps", 2), "worker": addresses("worker", 3)},
            "task": {"type": plan.spec.job.value, "index": plan.spec.index}}


def test_tf_config_lines_equal_the_controllers_plan(config: ClusterConfig,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    ports = export_ports(config)
    # auto ports skip the ones taken on the same machine: ps1 holds localhost:2222.
    assert ports == {"ps0": 2223, "ps1": 2222, "worker0": 2224, "worker1": 2222, "worker2": 2223}
    controller = plan_run(config, config.training, ports, "some-run", hold=False)
    lines = [json.loads(line) for line in tf_config_lines(config)]
    assert [line["task"] for line in lines] == [p.name for p in controller]
    for line, plan in zip(lines, controller, strict=True):
        assert line["tf_config"] == json.loads(plan.tf_config)
        assert line["argv"] == list(plan.argv) and line["cwd"] == plan.cwd
    code, out, _ = run_cli(["export", str(config.path), "--format", "tf-config"], capsys)
    assert code == ExitCode.OK and [json.loads(x) for x in out.splitlines()] == lines


def test_shell_commands_one_terminal_per_task(config: ClusterConfig) -> None:
    script = shell_script(config)
    commands = [line for line in script.splitlines() if line and not line.startswith("#")]
    plans = export_plans(config)
    assert len(commands) == len(plans)
    local = shlex.split(commands[0])
    assert local[:3] == ["cd", str(config.path.parent), "&&"]
    assert local[3] == f"TF_CONFIG={plans[0].tf_config}"
    assert local[-len(plans[0].argv):] == list(plans[0].argv)
    remote = shlex.split(commands[3])
    assert remote[:-1] == ["ssh", "-t", "-p", "2200", "-J", "me@10.1.0.1", "train@10.1.2.3"]
    inner = shlex.split(remote[-1])
    assert inner[:3] == ["cd", "~/tfdist", "&&"] and inner[-len(plans[3].argv):] == list(plans[3].argv)
    assert f"TF_CONFIG={plans[3].tf_config}" in inner


def _equivalent(a: ClusterConfig, b: ClusterConfig, ports: dict[str, int]) -> None:
    """Same tasks, same commands and TF_CONFIGs on the same ports, same restart policies."""
    plans_a = plan_run(a, a.training, ports, "r", hold=False)
    plans_b = plan_run(b, b.training, ports, "r", hold=False)
    def summary(plans: tuple[TaskPlan, ...]) -> list[tuple[str, tuple[str, ...], str]]:
        return [(p.name, p.argv, p.tf_config) for p in plans]

    assert summary(plans_a) == summary(plans_b)
    for job in Job:
        pa, pb = a.restart_policy(job), b.restart_policy(job)
        assert (pa.policy, pa.max_restarts) == (pb.policy, pb.max_restarts)


def test_tfjob_round_trips_to_an_equivalent_hosts_yaml(config: ClusterConfig, tmp_path: Path) -> None:
    manifest, back = tmp_path / "job.yaml", tmp_path / "back.yaml"
    assert cli.main(["export", str(config.path), "-o", str(manifest)]) == ExitCode.OK
    assert cli.main(["import", str(manifest), "-o", str(back)]) == ExitCode.OK
    imported = load_config(back)
    assert "localhost:auto" in back.read_text() and "# Imported by tfdist-tui" in back.read_text()
    assert all(t.host == "localhost" and t.port is None for t in imported.tasks)
    assert imported.restart_policy(Job.WORKER).policy is RestartMode.ON_FAILURE
    # Hosts differ (pods have none); on the same ports everything else is the same.
    ports = {t.name: 3000 + i for i, t in enumerate(config.tasks)}
    original = config.__class__(**{**config.__dict__, "hosts": {}, "tasks": tuple(
        t.__class__(t.job, t.index, "localhost", None, t.gpus) for t in config.tasks)})
    _equivalent(original, imported, ports)


def test_tf_config_round_trips_to_the_same_cluster(config: ClusterConfig, tmp_path: Path) -> None:
    first = json.loads(tf_config_lines(config)[0])
    source = tmp_path / "tf_config.json"
    source.write_text(json.dumps(first["tf_config"], indent="\t"))
    back = tmp_path / "back.yaml"
    assert cli.main(["import", str(source), "-o", str(back)]) == ExitCode.OK
    imported = load_config(back)
    assert [f"{t.host}:{t.port}" for t in imported.tasks] == [
        f"{config.host_of(t).address}:{export_ports(config)[t.name]}" for t in config.tasks]
    assert "10.1.2.3: reached over SSH" in back.read_text()


def test_a_handwritten_tfjob_imports_with_its_guesses_said(tmp_path: Path) -> None:
    """Shaped like Kubeflow's dist-mnist example: a PS with only its image's entry point, a
    Chief with ExitCode, command plus args, a GPU limit and an Evaluator."""
    back = tmp_path / "hosts.yaml"
    assert cli.main(["import", str(Path(__file__).with_name("tfjob_dist_mnist.yaml")),
                     "-o", str(back)]) == ExitCode.OK
    text = back.read_text()
    assert "PS has no command" in text and "Chief.restartPolicy ExitCode is taken as on-failure" in text
    assert "max_restarts 1 per task is backoffLimit 4 spread over 5" in text
    assert "python, /var/tf_dist_mnist/dist_mnist.py, --train_steps=100" in text
    imported = load_config(back)
    assert len(imported.ps_tasks) == 2 and imported.restart_policy(Job.PS).policy is RestartMode.NEVER
    trainers = [t for t in imported.tasks if t.job.value in ("chief", "worker")]
    assert sorted(t.gpus or 0 for t in trainers) == [0, 0, 0, 0, 1]
    assert imported.restart_policy(Job.WORKER).max_restarts == 1


def _manifest(replicas: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "x"},
                           "spec": {"tfReplicaSpecs": replicas}}, sort_keys=False)


_CONTAINER = {"template": {"spec": {"containers": [{"name": "tensorflow", "image": "i",
                                                    "command": ["python", "train.py"]}]}}}


@pytest.mark.parametrize(("name", "text", "where", "message"), [
    ("bad.json", '{"cluster": {"ps": ["a:1"],\n  "worker": ["b:2",]}}', ":2:20:", "invalid JSON"),
    ("noport.json", '{"cluster": {"ps": ["a:1"],\n  "worker": ["b"]}}', ":2:14:", "cluster.worker[0]"),
    ("job.json", '{"cluster": {"ps": ["a:1"], "master": ["b:2"]}}', ":1:29:", "unknown key 'master'"),
    ("kind.yaml", "kind: Deployment\n", ":1:7:", "expected TFJob"),
    ("type.yaml", _manifest({"Boss": {"replicas": 1, **_CONTAINER}}), ":7:5:", "unknown replica type"),
    ("policy.yaml", _manifest({"PS": {"replicas": 1, "restartPolicy": "Sometimes", **_CONTAINER}}),
     ":9:22:", "restartPolicy: expected one of Always, OnFailure, Never, ExitCode"),
    ("empty.yaml", "", ":1:1:", "file is empty"),
])
def test_bad_input_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      name: str, text: str, where: str, message: str) -> None:
    source = tmp_path / name
    source.write_text(text)
    code, out, err = run_cli(["import", str(source)], capsys)
    assert code == ExitCode.USAGE and out == ""
    assert err.startswith(f"error: {source}{where}") and message in err and "Traceback" not in err


def test_import_and_export_refuse_without_writing(config: ClusterConfig, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "hosts.yaml"
    existing.write_text("keep me\n")
    source = tmp_path / "tf.json"
    source.write_text('{"ps": ["a:1"], "worker": ["b:2"]}')
    code, _, err = run_cli(["import", str(source), "-o", str(existing)], capsys)
    assert code == ExitCode.USAGE and "--force" in err and existing.read_text() == "keep me\n"
    assert cli.main(["import", str(source), "-o", str(existing), "--force"]) == ExitCode.OK
    assert [t.name for t in load_config(existing).tasks] == ["ps0", "worker0"]
    code, out, err = run_cli(["export", str(config.path), "--name", "Not_A_Name"], capsys)
    assert code == ExitCode.USAGE and out == "" and "not a valid Kubernetes name" in err
    code, out, err = run_cli(["export", str(config.path), "--name", "a" * 55], capsys)
    assert code == ExitCode.USAGE and out == "" and "over 63 characters" in err
    code, out, err = run_cli(["export", str(tmp_path / "missing.yaml")], capsys)
    assert code == ExitCode.USAGE and "missing.yaml: file does not exist" in err


PROGRAM_HOSTS = """\
program:
  command: python train.py --job_name={job} --task_index={index} --ps_hosts={ps_hosts} --me={address}
  upload: .
cluster:
  ps: [localhost:auto]
  chief: [localhost:auto]
  worker: [localhost:auto, localhost:auto]
  evaluator: [localhost:auto]
training: {steps: 20}
"""


@pytest.fixture
def program_config(tmp_path: Path) -> ClusterConfig:
    (tmp_path / "train.py").write_text("print('hello')\n")
    path = tmp_path / "hosts.yaml"
    path.write_text(PROGRAM_HOSTS)
    return load_config(path)


def test_a_programs_tfjob_resolves_placeholders_per_replica(program_config: ClusterConfig,
                                                            tmp_path: Path) -> None:
    options = TFJobOptions("tf2", "ml")
    specs = tfjob_manifest(program_config, options)["spec"]["tfReplicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {"PS": 1, "Worker": 2, "Chief": 1, "Evaluator": 1}
    # The operator leaves the evaluator out of TF_CONFIG's cluster; so do our plans.
    plans = kubernetes_plans(program_config, options)
    assert json.loads(plans[0].tf_config)["cluster"] == {
        "chief": ["tf2-chief-0.ml.svc:2222"], "ps": ["tf2-ps-0.ml.svc:2222"],
        "worker": ["tf2-worker-0.ml.svc:2222", "tf2-worker-1.ml.svc:2222"]}
    fake = fake_python(tmp_path)
    for plan in plans:
        # Run as written: no shim (no controller in a pod) and no uploaded folder.
        assert plan.argv[:2] == ("python", "train.py")
        command = specs[REPLICA_TYPES[plan.spec.job.value]]["template"]["spec"]["containers"][0]["command"]
        env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
               "HOSTNAME": f"tf2-{plan.spec.job.value}-{plan.spec.index}"}
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=10, check=True)
        assert result.stdout.splitlines() == [
            "train.py", f"--job_name={plan.spec.job.value}", f"--task_index={plan.spec.index}",
            "--ps_hosts=tf2-ps-0.ml.svc:2222", f"--me={plan.spec.host}:2222"]
        assert plan.spec.host == f"tf2-{plan.spec.job.value}-{plan.spec.index}.ml.svc"


def test_a_programs_exports_run_it_as_written(program_config: ClusterConfig) -> None:
    lines = [json.loads(line) for line in tf_config_lines(program_config)]
    controller = plan_run(program_config, program_config.training, export_ports(program_config), "r")
    for line, plan in zip(lines, controller, strict=True):
        assert line["tf_config"] == json.loads(plan.tf_config)
        # The controller runs the script under the shim; by hand it runs as written.
        assert [a for a in plan.argv if a not in SHIM_ARGV] == line["argv"]
        assert line["cwd"] == str(program_config.path.parent)
    # By hand, in the controller's start order: the ps tasks, the chief, the others.
    terminals = re.findall(r"^# terminal \d+: (\w+) on", shell_script(program_config), re.M)
    assert terminals == ["ps0", "chief0", "worker0", "worker1", "evaluator0"]


def test_a_programs_tfjob_round_trips(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "tf2_ps_strategy"
    manifest, back = tmp_path / "job.yaml", tmp_path / "hosts.yaml"
    (tmp_path / "train.py").write_text((example / "train.py").read_text())
    assert cli.main(["export", str(example / "hosts.yaml"), "-o", str(manifest)]) == ExitCode.OK
    assert cli.main(["import", str(manifest), "-o", str(back)]) == ExitCode.OK
    original, imported = load_config(example / "hosts.yaml"), load_config(back)
    assert imported.program is not None and [t.job for t in imported.tasks] == [t.job for t in original.tasks]
    ports = {t.name: 3000 + i for i, t in enumerate(original.tasks)}
    # Placeholders come back resolved: the same commands, the same TF_CONFIGs.
    assert [p.argv for p in plan_run(original, original.training, ports, "r")] == \
        [p.argv for p in plan_run(imported, imported.training, ports, "r")]


def test_a_tf_config_with_a_chief_imports_for_the_built_in_trainer(tmp_path: Path) -> None:
    source, back = tmp_path / "tf.json", tmp_path / "hosts.yaml"
    source.write_text(json.dumps({"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1"],
                                              "evaluator": ["h4:1"]}, "task": {"type": "chief", "index": 0}}))
    assert cli.main(["import", str(source), "-o", str(back)]) == ExitCode.OK
    imported = load_config(back)
    assert [(t.name, t.host) for t in imported.tasks] == [
        ("ps0", "h3"), ("worker0", "h0"), ("worker1", "h1"), ("worker2", "h2")]
    assert "the chief is worker 0" in back.read_text() and "evaluator is left out" in back.read_text()
