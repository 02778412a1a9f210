"""The headless front end: formatting (pure) and whole runs in-process against the fake
trainer (real processes, real ports)."""

from __future__ import annotations

import dataclasses
import io
import json
import socket
import sys
from pathlib import Path

import pytest

from tests.support import with_progress
from tests.support.clirun import FAKE_TRAINER
from tests.support.fakes import make_config
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.common.exit_codes import ExitCode
from tui.config.cluster import Job
from tui.config.load import load_config
from tui.core.describe import reported_at
from tui.core.events import (
    RunOutcome,
    RunStarted,
    RunSummary,
    TaskOutput,
    TaskResult,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.headless import JsonPrinter, Printer, clean_text, run_headless
from tui.launch.lines import Stream
from tui.plan.tasks import TaskInfo

TASKS = (TaskInfo("ps0", Job.PS, 0, "localhost", 2222),
         TaskInfo("worker0", Job.WORKER, 0, "localhost", 2223),
         TaskInfo("worker1", Job.WORKER, 1, "localhost", 2224))


def started() -> RunStarted:
    return RunStarted(run_id="r1", run_dir=Path("/runs/r1"), tasks=TASKS,
                      settings=TrainingSettings(steps=100), t=0.0)


def printed(*events: object, colour: bool = False) -> str:
    out = io.StringIO()
    printer = Printer(out, colour=colour)
    for event in events:
        printer.handle(event)  # type: ignore[arg-type]
    return out.getvalue()


def test_output_is_prefixed_per_task_and_cleaned() -> None:
    text = printed(started(),
                   TaskOutput(task="worker1", stream=Stream.STDERR, lines=("\x1b[31mred\x1b[0m\x07 done",)),
                   TaskOutput.line("ps0", '{"event":"ready"}', is_event=True))
    lines = text.splitlines()
    assert lines[0] == "tfdist  | run r1: ps localhost:2222; workers localhost:2223, localhost:2224"
    assert lines[-1] == "worker1 | red done"
    assert '{"event"' not in text


def test_a_batch_of_lines_is_printed_line_by_line_each_made_inert() -> None:
    """A read of many lines is one event: every shown line gets its prefix, an event line is
    left out, and one line's unterminated escape does not swallow the lines after it."""
    batch = TaskOutput(task="worker0", stream=Stream.STDOUT,
                       lines=("one", "\x1b]52;c;c2VjcmV0 no terminator", '{"event":"ready"}',
                              "three \x9b2J\u202e", "x" * 5000), events=frozenset({2}))
    lines = [line for line in printed(started(), batch).splitlines() if line.startswith("worker0")]
    assert lines[:3] == ["worker0 | one", "worker0 | ", "worker0 | three "]
    assert lines[3].startswith("worker0 | xxx") and lines[3].endswith("more characters in logs/worker0.log)")
    assert len(lines) == 4


def test_colour_only_when_asked() -> None:
    line = TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("hi",))
    assert "\x1b[" not in printed(started(), line)
    assert "\x1b[36mps0     |\x1b[0m hi" in printed(started(), line, colour=True)


def test_a_huge_line_is_cut_on_screen() -> None:
    text = printed(started(), TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("x" * 10_000,)))
    assert "... (6000 more characters in logs/ps0.log)" in text


def test_state_changes_and_trainer_events() -> None:
    text = printed(
        started(),
        TaskStateChanged(task="worker0", old=TaskState.PENDING, new=TaskState.STARTING, pid=42),
        TaskStateChanged(task="worker0", old=TaskState.STARTING, new=TaskState.FAILED, pid=42,
                         exit_code=2, reason="exited with code 2 before reporting ready"),
        TrainerEvent(task="worker0", event=protocol.Error(role="worker", index=0, type="usage",
                                                          message="--data-path: missing")),
    )
    assert "worker0 | -- starting (pid 42)" in text
    assert "worker0 | -- failed: exited with code 2 before reporting ready" in text
    assert "worker0 | -- error: usage: --data-path: missing" in text


def placement() -> protocol.Placement:
    shard = protocol.VariableShard(name="w", variable="w", shard=0, num_shards=1, shape=(2,),
                                   dtype="float32", bytes=3072, ps=1)
    return protocol.Placement(role="worker", index=0, model="mlp", strategy="round_robin",
                              partitions=1, num_ps=2, variables=(shard,), ps_bytes=(1024, 3072))


def test_placement_table_is_printed_once_with_totals_and_ratio() -> None:
    event = TrainerEvent(task="worker0", event=placement())
    text = printed(started(), event, event)
    assert text.count("placement of mlp") == 1
    assert "tfdist  |   ps0       0 shards     1.0 KiB   25.0%" in text
    assert "tfdist  |   ps1       1 shards     3.0 KiB   75.0%" in text
    assert "max/mean bytes per ps: 1.50" in text


def test_a_later_different_placement_is_printed_as_the_one_that_holds_with_its_time() -> None:
    """A TF2 program reports its placement again once more variables exist: the latest is
    the run's (as in the app's Placement pane), said with when it came."""
    first = placement()
    later = dataclasses.replace(first, t=first.t + 5, ps_bytes=(2048, 3072))
    text = printed(started(), TrainerEvent(task="chief0", event=first),
                   TrainerEvent(task="chief0", event=later))
    assert text.count("placement of mlp at ") == 2
    assert f"replaces the one of {reported_at(first)}" in text
    assert "max/mean bytes per ps: 1.20" in text


def test_progress_line_sums_workers_and_skips_repeats() -> None:
    out = io.StringIO()
    printer = Printer(out, colour=False)
    printer.handle(started())
    printer.progress_line()
    assert "ex/s" not in out.getvalue()  # nothing to report yet
    steps = [TrainerEvent(task=f"worker{index}", event=protocol.Step(
        role="worker", index=index, global_step=40 + index, local_step=20, loss=0.5,
        examples_per_sec=rate, step_time=0.1, target=100)) for index, rate in ((0, 100.0), (1, 50.5))]
    for event in with_progress([started(), *steps])[1:]:  # as the supervisor publishes them
        printer.handle(event)
    printer.progress_line()
    printer.progress_line()
    lines = [line for line in out.getvalue().splitlines() if "ex/s" in line]
    assert lines == ["tfdist  | step 41/100 (41%)  150.5 ex/s [worker0 100.0, worker1 50.5]  loss 0.5000"]


def test_summary_shows_each_exit_code_and_a_failed_tasks_last_lines() -> None:
    summary = RunSummary(
        run_id="r1", run_dir=Path("/runs/r1"), outcome=RunOutcome.FAILED,
        reason="worker1 exited with code 3", started_at=0.0, wall_time=12.34, global_step=50,
        target=100, final_loss=0.25, final_accuracy=None,
        tasks=(TaskResult(name="ps0", state=TaskState.STOPPED, exit_code=-15),
               TaskResult(name="worker0", state=TaskState.STOPPED, exit_code=-15),
               TaskResult(name="worker1", state=TaskState.FAILED, exit_code=3,
                          reason="exited with code 3",
                          last_lines=tuple(f"line {i}" for i in range(10)))))
    out = io.StringIO()
    printer = Printer(out, colour=False)
    printer.handle(started())
    printer.summary(summary)
    text = out.getvalue()
    assert "tfdist  | run failed: worker1 exited with code 3" in text
    assert "  steps        50 / 100\n" in text
    assert "  wall time    12.3 s\n" in text
    assert "  final loss   0.2500\n  accuracy     n/a\n" in text
    assert "  worker1  failed, exit code 3 (exited with code 3)\n" in text
    assert "  ps0      stopped, exit code -15\n" in text
    assert "  run dir      /runs/r1\n" in text
    assert "worker1 exited with code 3; its last 10 lines:\n" in text
    assert "  worker1 | line 9\n" in text


def test_json_printer_prints_every_event_once() -> None:
    out = io.StringIO()
    printer = JsonPrinter(out)
    printer.handle(started())
    printer.handle(TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("plain",)))
    printer.handle(TaskOutput(task="ps0", stream=Stream.STDOUT, lines=("{}",), events=frozenset({0})))
    printer.handle(TrainerEvent(task="worker0", event=placement()))
    kinds = [json.loads(line)["type"] for line in out.getvalue().splitlines()]
    assert kinds == ["run_started", "task_output", "trainer_event"]


def test_clean_text() -> None:
    assert clean_text("\x1b[1;31mbold\x1b[0m\ttab\r\x1b]0;t\x07x\x00") == "bold\ttabx"


# -- whole runs with the fake trainer --------------------------------------------------


def fake_supervisor(config: object, tmp_path: Path) -> Supervisor:
    return Supervisor(config, runs_root=tmp_path / "runs",  # type: ignore[arg-type]
                      options=SupervisorOptions(trainer_argv=[str(FAKE_TRAINER)], grace=1.0))


async def headless(tmp_path: Path, *, timeout: float | None = None, json_output: bool = False,
                   ports: list[int | None] | None = None) -> tuple[ExitCode, str, str]:
    config = make_config(tmp_path, ports=ports)
    out, err = io.StringIO(), io.StringIO()
    options = RunOptions(config=config, runs_root=tmp_path / "runs", timeout=timeout,
                         json_output=json_output)
    code = await run_headless(options, supervisor=fake_supervisor(config, tmp_path), out=out, err=err,
                              handle_signals=False, progress_interval=0.05)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_STEPS", "20")
    return monkeypatch


async def test_clean_run_exits_0_with_a_summary(tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    code, out, _ = await headless(tmp_path)
    assert code is ExitCode.OK, out
    assert "tfdist  | run succeeded" in out
    assert "placement of mlp" in out
    assert "  worker1  succeeded, exit code 0" in out
    assert "  steps        40 / 40" in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert f"  run dir      {run_dir}" in out
    assert json.loads((run_dir / "summary.json").read_text())["outcome"] == "succeeded"


async def test_a_failing_task_exits_1_with_its_exit_code_and_last_lines(
        tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    fake_env.setenv("FAKE_FAIL", "worker1")
    fake_env.setenv("FAKE_FOREVER", "worker0")
    code, out, _ = await headless(tmp_path)
    assert code is ExitCode.TASK_FAILED, out
    assert "run failed: worker1 exited with code 3" in out
    assert "worker1 exited with code 3; its last" in out
    assert "worker1 | RuntimeError: fake failure" in out
    assert "worker1 | error: RuntimeError: fake failure" in out


async def test_a_task_failing_before_ready_exits_1(tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    fake_env.setenv("FAKE_FAIL_EARLY", "worker0")
    code, out, _ = await headless(tmp_path)
    assert code is ExitCode.TASK_FAILED
    assert "run failed: worker0 exited with code 2 before reporting ready" in out
    assert "worker0 | trainer: error: --data-path: /nonexistent does not exist" in out


async def test_timeout_stops_everything_and_exits_3(tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    fake_env.setenv("FAKE_FOREVER", "*")
    code, out, _ = await headless(tmp_path, timeout=2.0)
    assert code is ExitCode.TIMEOUT, out
    assert "run timeout: timed out after 2 s" in out
    results = [line for line in out.splitlines() if ", exit code" in line]
    assert results and all(" stopped, exit code " in line for line in results)


async def test_json_mode_prints_only_json(tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    code, out, _ = await headless(tmp_path, json_output=True)
    assert code is ExitCode.OK
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["type"] == "run_started" and records[-1]["type"] == "run_finished"
    assert records[-1]["summary"]["outcome"] == "succeeded"
    assert any(r["type"] == "trainer_event" and r["event"]["event"] == "placement" for r in records)


async def test_a_port_in_use_exits_2_naming_host_port_and_holder(
        tmp_path: Path, fake_env: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code, out, err = await headless(tmp_path, ports=[port, None, None])
    assert code is ExitCode.USAGE
    assert err.startswith(f"error: localhost:{port} is in use by pid ")
    assert out == "" and not (tmp_path / "runs").exists()


class StubSupervisor:
    def __init__(self) -> None:
        self.stops: list[tuple[RunOutcome, str]] = []
        self.kills = 0

    async def stop_all(self, outcome: RunOutcome, reason: str) -> None:
        self.stops.append((outcome, reason))

    def kill_all(self) -> None:
        self.kills += 1


async def test_a_signal_during_preflight_is_held_and_a_second_one_kills() -> None:
    import asyncio
    import signal

    from tui.headless import _Stopper

    stub, err = StubSupervisor(), io.StringIO()
    stopper = _Stopper(stub, err)  # type: ignore[arg-type]
    stopper.on_signal(signal.SIGINT)
    await asyncio.sleep(0)
    assert stub.stops == []  # nothing to stop yet
    stopper.run_started()
    await asyncio.sleep(0)
    assert stub.stops == [(RunOutcome.INTERRUPTED, "interrupted by SIGINT")]
    stopper.on_signal(signal.SIGTERM)
    assert stub.kills == 1
    assert err.getvalue().splitlines() == [
        "tfdist: SIGINT: stopping every task (again to kill them now)",
        "tfdist: SIGTERM: killing every task"]


def test_start_up_lines_show_each_tasks_share_of_its_host() -> None:
    tasks = (TaskInfo("ps0", Job.PS, 0, "localhost", 2222, "1 core"),
             TaskInfo("worker0", Job.WORKER, 0, "gpu1", 2223, "4 cores (8 threads), GPU 0,1"))
    text = printed(RunStarted(run_id="r1", run_dir=Path("/runs/r1"), tasks=tasks,
                              settings=TrainingSettings(steps=100), t=0.0))
    assert "tfdist  | shares: ps0 1 core; worker0 4 cores (8 threads), GPU 0,1\n" in text
    assert "shares:" not in printed(started())  # planned without shares: no line


FLOOD_LINES = 300_000

FLOODER = f"""
import sys
if sys.argv[1] == "worker":
    for n in range({FLOOD_LINES}):
        sys.stdout.write(f"line {{n:07d}} " + "x" * 80 + "\\n")
        if n == 1000:
            sys.stdout.write("\\x1b]52;c;c2VjcmV0\\x07clipboard\\n")
            sys.stderr.write("from stderr\\n")
"""


async def test_a_flooding_task_loses_no_line_on_screen_or_in_its_log(tmp_path: Path) -> None:
    """A task printing as fast as it can: every line reaches the run directory's log and the
    screen, in order, the escape sequence in it inert, and the run ends as it should."""
    program = tmp_path / "flood.py"
    program.write_text(FLOODER)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"program:\n  command: {sys.executable} {program} {{job}}\n  shim: false\n"
                     "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    out = io.StringIO()
    code = await run_headless(RunOptions(config=load_config(hosts), runs_root=tmp_path / "runs"),
                              out=out, err=out, handle_signals=False)
    assert code is ExitCode.OK, out.getvalue()[-2000:]
    expected = [f"line {n:07d} " + "x" * 80 for n in range(FLOOD_LINES)]
    shown = [line.removeprefix("worker0 | ") for line in out.getvalue().splitlines()
             if line.startswith("worker0 | line ")]
    assert shown == expected
    assert "worker0 | clipboard" in out.getvalue() and "\x1b]" not in out.getvalue()
    (run_dir,) = (tmp_path / "runs").iterdir()
    log = (run_dir / "logs" / "worker0.log").read_text().splitlines()
    assert [line.split(" out | ", 1)[1] for line in log if " out | line " in line] == expected
    assert any(line.endswith(" err | from stderr") for line in log)


def test_the_hosts_are_printed_as_the_core_says_once_per_change() -> None:
    from tui.core.events import HostRow, HostsProgress
    from tui.core.host_state import HostState

    def hosts(*states: HostState, detail: str = "") -> HostsProgress:
        return HostsProgress(hosts=tuple(HostRow(f"h{i}", f"10.0.0.{i}", s, detail if s is F else "")
                                         for i, s in enumerate(states)))

    W, C, R, F = HostState.WAITING, HostState.CONNECTING, HostState.READY, HostState.FAILED
    events = [hosts(W, W), hosts(C, W), hosts(C, W), hosts(R, F, detail="unreachable: no answer")]
    assert printed(*events).splitlines() == [f"tfdist | {e.line}" for e in (events[0], events[1], events[3])]
    assert events[3].line == "hosts: 1/2 ready, 1 failed (h1: unreachable: no answer)"


def test_a_host_out_of_reach_and_back_gets_a_line_of_its_own() -> None:
    """The progress line counts hosts; a host that goes out of reach during a run, is lost or
    comes back is named with what the controller saw, once."""
    from tui.core.events import HostRow, HostsProgress
    from tui.core.host_state import HostState

    def hosts(h1: HostState, detail: str = "") -> HostsProgress:
        return HostsProgress(hosts=(HostRow("h0", "10.0.0.1", HostState.READY),
                                    HostRow("h1", "10.0.0.2", h1, detail)))

    events = [hosts(HostState.READY), hosts(HostState.UNREACHABLE, "no answer for 6 s"),
              hosts(HostState.UNREACHABLE, "no answer for 6 s"), hosts(HostState.LOST, "past its 30 s lease"),
              hosts(HostState.READY, "reconnected after 41 s")]
    assert printed(*events).splitlines() == [
        "tfdist | hosts: 2/2 ready",
        "tfdist | hosts: 1/2 ready, 1 unreachable",
        "tfdist | host h1 (10.0.0.2): unreachable: no answer for 6 s",
        "tfdist | hosts: 1/2 ready, 1 lost",
        "tfdist | host h1 (10.0.0.2): lost: past its 30 s lease",
        "tfdist | hosts: 2/2 ready",
        "tfdist | host h1 (10.0.0.2): ready: reconnected after 41 s"]


#: Run as ``python -c``: the command line's main, whose first write to stdout reports what
#: was loaded and which addresses were connected to by then, and ends the process.
FIRST_LINE = """
import json, os, socket, sys
connects = []
real_connect = socket.socket.connect
def connect(sock, address):
    connects.append(repr(address))
    return real_connect(sock, address)
socket.socket.connect = connect
class First:
    def write(self, text):
        print(json.dumps({"line": text, "modules": sorted(sys.modules), "connects": connects}),
              file=sys.stderr, flush=True)
        os._exit(0)
    def flush(self):
        pass
    def isatty(self):
        return False
sys.stdout = First()
from tui.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_the_first_line_names_every_host_before_anything_is_contacted_or_loaded(
        tmp_path: Path, json_output: bool) -> None:
    """64 SSH hosts: the hosts' line is the run's first, written before the launchers (and
    asyncssh), the supervisor or TensorFlow are loaded, and before any connection: on a
    loaded machine, loading them had kept a start silent for seconds."""
    import subprocess

    import yaml

    hosts = {f"h{n}": {"address": f"192.0.2.{n + 1}", "user": "root", "workdir": "/tmp/never"}
             for n in range(64)}
    tasks = [f"h{n}:2222" for n in range(64)]
    (tmp_path / "hosts.yaml").write_text(yaml.safe_dump({
        "hosts": hosts, "cluster": {"ps": tasks[:4], "worker": tasks[4:]},
        "program": {"command": "python -c pass", "shim": False}, "run_dir": str(tmp_path / "runs")}))
    argv = [str(tmp_path / "hosts.yaml"), "--no-ui", *(["--json"] if json_output else [])]
    repo = Path(__file__).resolve().parents[1]  # (``-c`` puts the folder it runs in first on the path)
    result = subprocess.run([sys.executable, "-c", FIRST_LINE, *argv], cwd=repo, capture_output=True,
                            text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    first = json.loads(result.stderr.splitlines()[-1])
    if json_output:
        record = json.loads(first["line"])
        assert record["type"] == "hosts" and len(record["hosts"]) == 64
        assert {host["state"] for host in record["hosts"]} == {"waiting"}
    else:
        assert first["line"] == "tfdist | hosts: 0/64 ready, 64 waiting\n"
    assert first["connects"] == []
    loaded = set(first["modules"])
    assert not {m for m in loaded if m.split(".")[0] in ("asyncssh", "tensorflow", "textual")}
    assert not loaded & {"tui.core.session", "tui.launch.router", "tui.core.supervisor.lifecycle",
                         "tui.launch.ssh.launcher", "tui.launch.local.launcher"}
