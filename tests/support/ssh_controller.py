"""A minimal controller for the kill test: ``ssh_controller.py HOST_JSON RUN_ID``.

Starts one trainer with ``--hold`` on the host over SSH, prints ``loaded <remote pid>`` once
the trainer has loaded, then waits to be killed (never sending ``go``)."""

from __future__ import annotations

import asyncio
import json
import sys

from trainer import protocol
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.lines import Stream
from tui.launch.owner import RUN_ID_ENV
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.streams import each_line
from tui.plan.tasks import HOLD_FLAG
from tui.program.trainer import TRAINER_ARGV


async def main(entry: dict[str, object], run_id: str) -> None:
    spec = HostSpec(name="remote", **entry)  # type: ignore[arg-type]
    launcher = SSHLauncher()
    ports = await launcher.free_ports(spec, 2)
    tf_config = {"cluster": {"ps": [f"{spec.address}:{ports[0].port}"],
                             "worker": [f"{spec.address}:{ports[1].port}"]},
                 "task": {"type": "worker", "index": 0}}
    for reservation in ports:
        reservation.release()
    argv = [spec.interpreter, *TRAINER_ARGV, HOLD_FLAG, "--steps", "30", "--hidden-units", "16"]
    env = {"TF_CONFIG": json.dumps(tf_config), "PYTHONUNBUFFERED": "1", RUN_ID_ENV: run_id}
    process = await launcher.start(TaskSpec(Job.WORKER, 0, "remote", None), spec, argv, env, spec.workdir)
    async for line in each_line(process.output()):
        event = protocol.parse_event(line.text) if line.stream is Stream.STDOUT else None
        if isinstance(event, protocol.Loaded):
            print(f"loaded {process.pid}", flush=True)
        else:
            print(line.text, file=sys.stderr, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
