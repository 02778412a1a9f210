"""Traffic per ps as logic and with real samplers on this machine: ``ss`` output, sockets told
apart by host and port (every ps on port 2222 of its own host), whole-run totals, the one
long-lived sampler per host, and what a run too short to sample says. Over SSH on real links:
tests/launch/test_lab_traffic.py."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from tests.support.fakes import make_config
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import HostSpec, Job
from tui.core.events import RunFinished, RunOutcome, RunStarted, RunSummary
from tui.core.traffic import PsTraffic, TrafficMeter, TrafficMonitor, TrafficSample, summarise
from tui.core.traffic_sampler import SAMPLE_END, HostSampler, SamplingFailed, SocketCounters, parse_ss
from tui.headless import JsonPrinter, Printer
from tui.launch.command_stream import CommandStream, open_local_command
from tui.plan.tasks import TaskInfo

SS_OUTPUT = """\
0      0      [::ffff:127.0.0.1]:41000 [::ffff:127.0.0.1]:50001 users:(("python",pid=11,fd=9))
\t cubic wscale:7,7 rto:204 bytes_sent:1000 bytes_acked:1001 bytes_received:200 segs_out:4
0      0      127.0.0.1:50002 127.0.0.1:42000 users:(("python",pid=12,fd=7))
\t cubic bytes_sent:300 bytes_acked:301 bytes_received:4000 segs_out:2
0      0      127.0.0.1:50003 127.0.0.1:41000 users:(("python",pid=99,fd=7))
\t cubic bytes_sent:5 bytes_received:7
0      0      127.0.0.1:42000 127.0.0.1:50009
\t cubic bytes_sent:10 bytes_received:20
"""
LOCAL = HostSpec(name="localhost", address="localhost")


def test_ss_sockets_are_told_apart_by_owner_else_by_port() -> None:
    sockets = parse_ss(SS_OUTPUT)
    assert sockets[0] == SocketCounters("[::ffff:127.0.0.1]:41000", "[::ffff:127.0.0.1]:50001",
                                        1000, 200, (11,))
    assert [s.local_port for s in sockets] == [41000, 50002, 50003, 42000]
    meter = TrafficMeter({("h", 41000): "ps0", ("h", 42000): "ps1"}, {("h", 11): "ps0", ("h", 12): "ps1"})
    # ps1's own channel to a worker (pid 12), a worker's socket (pid 99, not a ps) and an
    # ownerless socket on ps1's port.
    assert [meter.owner("h", s) for s in sockets] == ["ps0", "ps1", None, "ps1"]
    first = meter.update(0.0, 0, {"h": sockets})
    assert [(p.task, p.sent_total, p.received_total) for p in first.ps] == [
        ("ps0", 1000, 200), ("ps1", 310, 4020)]
    grown = [SocketCounters(s.local, s.peer, s.bytes_sent * 2, s.bytes_received * 2, s.pids)
             for s in sockets]
    second = meter.update(2.0, 100, {"h": grown})
    assert [(p.sent_per_sec, p.received_per_sec) for p in second.ps] == [(500.0, 100.0), (155.0, 2010.0)]


def test_every_ps_on_port_2222_of_its_own_host_has_its_own_traffic() -> None:
    """The standard layout: the same port, even the same pid number, on two hosts."""
    meter = TrafficMeter({("h1", 2222): "ps0", ("h2", 2222): "ps1"}, {("h1", 7): "ps0", ("h2", 7): "ps1"})
    listings = {
        "h1": [SocketCounters("10.0.0.1:2222", "10.0.0.3:40000", 1000, 100, (7,)),
               SocketCounters("10.0.0.1:2222", "10.0.0.4:40000", 1000, 100)],  # no owner shown
        "h2": [SocketCounters("10.0.0.2:2222", "10.0.0.3:40001", 5000, 500, (7,)),
               SocketCounters("10.0.0.2:2222", "10.0.0.4:40001", 5000, 500, (8,))],  # not a ps
    }
    sample = meter.update(0.0, 0, listings)
    assert [(p.task, p.sent_total, p.received_total) for p in sample.ps] == [
        ("ps0", 2000, 200), ("ps1", 5000, 500)]


def test_a_host_left_out_of_a_sample_is_counted_once_when_it_answers_again() -> None:
    meter = TrafficMeter({("h1", 1): "ps0", ("h2", 1): "ps1"})
    sock = {name: SocketCounters(f"{name}:1", "w:9", 100, 0) for name in ("h1", "h2")}
    meter.update(0.0, 0, {"h1": [sock["h1"]], "h2": [sock["h2"]]})
    meter.update(1.0, 1, {"h1": [SocketCounters("h1:1", "w:9", 200, 0)]})  # h2 did not answer
    last = meter.update(2.0, 2, {"h1": [SocketCounters("h1:1", "w:9", 300, 0)],
                                 "h2": [SocketCounters("h2:1", "w:9", 300, 0)]})
    assert [(p.task, p.sent_total) for p in last.ps] == [("ps0", 300), ("ps1", 300)]
    assert [p.sent_per_sec for p in last.ps] == [100.0, 200.0]


def test_the_summary_has_whole_run_bytes_and_training_rates() -> None:
    meter = TrafficMeter({("h", 1): "ps0"})
    samples = [meter.update(t, step, {"h": [SocketCounters("h:1", "w:9", 100 * int(t), 100 * int(t))]})
               for t, step in ((0.0, 0), (1.0, 10), (2.0, 30), (3.0, 30))]
    placement = protocol.Placement(role="worker", index=0, model="m", strategy="greedy", partitions=1,
                                   num_ps=1, variables=(), ps_bytes=(50,))
    summary = summarise(samples, placement)
    assert summary is not None
    # Rates from the first sample with steps to the first at the final step; bytes to the last.
    assert (summary.window_seconds, summary.steps_per_sec) == (1.0, 20.0)
    assert summary.ps[0].measured_per_sec == 200.0
    assert summary.ps[0].expected_per_sec == 50 * 2 * 20.0
    assert summary.lines() == ["ps0    200 B/s measured, expected 2.0 KiB/s (sent 300 B, received 300 B)",
                               "max/mean traffic per ps 1.00 (placement predicts 1.00)"]
    assert summarise(samples[:2], None) is None
    # A user's program (placement seen by the shim): its traffic per step is not known, so
    # neither is an expected rate nor an imbalance the placement "predicts".
    theirs = summarise(samples, dataclasses.replace(placement, strategy="ParameterServerStrategy"))
    assert theirs is not None and theirs.expected_imbalance is None
    assert theirs.lines() == ["ps0    200 B/s measured, expected not known (sent 300 B, received 300 B)",
                              "max/mean traffic per ps 1.00"]


async def test_one_sampler_process_per_host_answers_every_sample(tmp_path: Path) -> None:
    received, ended = asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(100_000)
        received.set()
        await reader.read()  # until the client closes
        writer.close()
        ended.set()

    def samplers() -> list[psutil.Process]:
        return [p for p in psutil.Process().children() if SAMPLE_END in " ".join(p.cmdline())]

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sampler = HostSampler(LOCAL, [port], run_command=_never, open_command=_local)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"x" * 100_000)
        await writer.drain()
        await asyncio.wait_for(received.wait(), 10)
        first = await sampler.read(10)
        assert first is not None
        (process,) = samplers()
        mine = [s for s in first if os.getpid() in s.pids]
        assert sum(s.bytes_sent for s in mine) >= 100_000  # the client's sending side
        assert sum(s.bytes_received for s in mine) >= 100_000  # the server's side
        for _ in range(5):
            assert await sampler.read(10) is not None
        assert samplers() == [process]  # the same process answered every read
        writer.close()
        await asyncio.wait_for(ended.wait(), 10)
    finally:
        await sampler.close()
        server.close()
        await server.wait_closed()
    assert samplers() == []  # it ended when its stdin closed


async def test_ss_failing_stops_the_sampling_with_its_words(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ss"
    fake.write_text("#!/bin/sh\necho 'Cannot open netlink socket: Operation not permitted' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    sampler = HostSampler(LOCAL, [1], run_command=_never, open_command=_local)
    try:
        with pytest.raises(SamplingFailed, match="status 3: Cannot open netlink socket"):
            await sampler.read(10)
    finally:
        await sampler.close()


async def _local(host: HostSpec, argv: Sequence[str]) -> CommandStream:
    return await open_local_command(argv)


async def _never(host: HostSpec, argv: object) -> str:
    raise AssertionError("a sampler with a stream runs no command per sample")


def _summary(run_dir: Path) -> RunSummary:
    return RunSummary(run_id="r", run_dir=run_dir, outcome=RunOutcome.SUCCEEDED, reason="",
                      started_at=0.0, wall_time=1.0, global_step=10, target=10, final_loss=None,
                      final_accuracy=None, tasks=())


async def test_a_run_too_short_to_sample_says_traffic_not_measured(tmp_path: Path) -> None:
    tasks = (TaskInfo("ps0", Job.PS, 0, "localhost", 2222),
             TaskInfo("worker0", Job.WORKER, 0, "localhost", 2223))

    async def ss(host: HostSpec, argv: object) -> str:
        return ""

    monitor = TrafficMonitor(make_config(tmp_path, num_workers=1), ss, interval=60)
    text, records = io.StringIO(), io.StringIO()
    printer, json_printer = Printer(text, colour=False), JsonPrinter(records, monitor)
    started = RunStarted(run_id="r", run_dir=tmp_path, tasks=tasks, settings=TrainingSettings(steps=10))
    monitor.handle(started)
    json_printer.handle(started)
    monitor.record_sample(TrafficSample(0.0, 0, (PsTraffic("ps0", 0.0, 0.0, 0, 0),)))
    finished = RunFinished(summary=_summary(tmp_path))
    monitor.handle(finished)
    json_printer.handle(finished)
    await monitor.close()
    printer.traffic(monitor.final_update)
    assert "  traffic      not measured: the run was too short to sample" in text.getvalue()
    lines = [json.loads(line) for line in records.getvalue().splitlines()]
    assert [r["type"] for r in lines] == ["run_started", "traffic", "run_finished"]
    assert lines[1]["ps"] == [{"task": "ps0", "sent_per_sec": 0.0, "received_per_sec": 0.0, "sent_total": 0,
                               "received_total": 0, "expected_per_sec": None}]
    assert lines[2]["traffic"]["summary"] is None
    assert lines[2]["traffic"]["not_measured"].startswith("the run was too short to sample")
    assert json.loads((tmp_path / "traffic.json").read_text()) == lines[2]["traffic"]
