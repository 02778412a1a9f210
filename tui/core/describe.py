"""Short human descriptions of trainer events, shared by the summary's last lines and the
front ends (a task's exit: :class:`tui.core.exits.ExitInfo`)."""

from __future__ import annotations

import time

from trainer import protocol


def format_number(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def reported_at(event: protocol.Event) -> str:
    """When a task reported ``event``, as both front ends say it (``12:03:04``): a run may
    report its placement more than once (a TF2 program creates variables as it goes), and
    each screen shows the latest, with its time."""
    return time.strftime("%H:%M:%S", time.localtime(event.t))


def same_placement(a: protocol.Placement, b: protocol.Placement) -> bool:
    """Whether two placement reports say the same (a report again changes nothing shown)."""
    return (a.ps_bytes, a.variables, a.strategy, a.partitions) == (b.ps_bytes, b.variables, b.strategy,
                                                                   b.partitions)


def describe_event(event: protocol.Event) -> str:
    """One line saying what ``event`` reports."""
    if isinstance(event, protocol.Loaded):
        return f"loaded in {event.seconds:.1f} s (pid {event.pid}), waiting for its turn"
    if isinstance(event, protocol.Ready):
        version = f", TensorFlow {event.tf_version}" if event.tf_version else ""
        return f"ready on {event.address} (pid {event.pid}{version})"
    if isinstance(event, protocol.Initialized):
        chief = " as chief" if event.is_chief else ""
        return f"initialized{chief} at step {event.global_step} after {event.seconds:.1f} s"
    if isinstance(event, protocol.Placement):
        return (f"placement: {len(event.variables)} variable shards on {event.num_ps} ps "
                f"({event.strategy}), max/mean {event.max_mean_ratio:.2f}")
    if isinstance(event, protocol.Step):
        target = f"/{event.target}" if event.target else ""
        return (f"step {event.global_step}{target} loss {format_number(event.loss)} "
                f"{event.examples_per_sec:.1f} ex/s")
    if isinstance(event, protocol.Eval):
        return (f"eval at step {event.global_step}: accuracy {format_number(event.accuracy)} "
                f"loss {format_number(event.loss)} ({event.examples} examples)")
    if isinstance(event, protocol.Checkpoint):
        text = f"checkpoint {event.action} at step {event.global_step}"
        if event.path:
            text += f" {event.path}"
        if event.reason:
            text += f" ({event.reason})"
        return text
    if isinstance(event, protocol.Done):
        if event.reason == protocol.REASON_ENDED_IN_JOIN:
            return "ended by the controller in server.join()"
        if event.role == "ps":  # a ps has no step of its own: it leaves once every worker is done
            return f"done ({event.reason})"
        if event.reason == protocol.REASON_PROGRAM_ENDED and not event.global_step:
            return f"done ({event.reason})"  # a user's task that only served (TF2): no step seen
        return f"done ({event.reason}) at step {event.global_step}"
    if isinstance(event, protocol.Error):
        return f"error: {event.type}: {event.message}"
    if isinstance(event, protocol.StepAnatomy):
        return anatomy_line(event)
    return event.KIND


def part_name(part: protocol.AnatomyPart) -> str:
    """``compute``, ``read ps0``, ``push ps1``, ..."""
    return part.part if part.ps is None else f"{part.part} ps{part.ps}"


def coordinator_text(event: protocol.StepAnatomy) -> str:
    """A TF2 coordinator's functions as it sees them: their mean time from schedule to result,
    queued and on a worker, each worker's mean, the retried; what it cannot see, said."""
    shares = " · ".join(f"{'on a worker' if p.part == 'function' else p.part} {p.share:.0%}"
                        for p in event.parts)
    workers = ", ".join(f"worker{w} {seconds * 1000:.2f} ms" for w, seconds in enumerate(event.by_worker)
                        if seconds is not None)
    text = (f"{event.every} functions to batch {event.global_step} as the coordinator sees them, "
            f"{event.seconds * 1000:.2f} ms each from schedule to result: {shares}")
    text += f" ({workers})" if workers else ""
    text += f"; {event.retried} retried" if event.retried else ""
    return text + "; inside a function (compute, reads, pushes) is not seen from the coordinator"


def anatomy_line(event: protocol.StepAnatomy) -> str:
    """A sampled step's parts as shares of it, largest first; parts of no time left out."""
    if event.coordinator:
        return coordinator_text(event)
    parts = sorted((p for p in event.parts if p.share >= 0.005), key=lambda p: -p.share)
    shown = " · ".join(f"{part_name(p)} {p.share:.0%}" for p in parts)
    return (f"step {event.global_step} took {event.seconds * 1000:.2f} ms: {shown} "
            f"(1 step in {event.every} traced, costing {event.cost:.1%})")
