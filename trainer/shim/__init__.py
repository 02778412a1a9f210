"""The shim: run a user's own TensorFlow program, unchanged, as one task of a run the
controller drives, TF1 or TF2, a script or a module, with the same panes and a clean end.

The contract with the controller (its plan builds the command line):

- **Invocation**: ``<python> -c BOOTSTRAP <script.py> <args...>`` or ``<python> -c BOOTSTRAP
  -m <package.module> <args...>`` (:data:`BOOTSTRAP`; ``python -m trainer.shim ...`` works
  too, by hand), cwd the folder of hosts.yaml (the uploaded folder remotely), env
  ``TF_CONFIG`` (standard format), plus ``TFDIST_RUN_ID``, ``TFDIST_SHIM=1``,
  ``PYTHONUNBUFFERED=1`` and a ``PYTHONPATH`` holding the directory of the ``trainer``
  package and :data:`REPORT_DIR`. The program runs as ``__main__`` (``runpy``) with
  ``sys.argv`` and ``sys.path`` as ``python script.py`` or ``python -m module`` would set
  them (the script's folder, or the working folder, first; then :data:`REPORT_DIR`), so
  argparse, absl and ``tf.compat.v1.app.flags`` see its own flags. Before it runs, the shim
  hides itself (:mod:`trainer.shim.private`): our modules leave ``sys.modules`` for private
  names and our folder leaves ``sys.path`` and ``PYTHONPATH``, so a user's package called
  ``trainer`` (Cloud ML Engine's layout) or ``tui`` is the one the program imports. A
  missing script or module exits 2 with one line.
- **Events** on stdout, one :mod:`trainer.protocol` JSON line each; every other line is the
  program's own. ``ready`` when the task's ``tf.train.Server`` / ``tf.distribute.Server``
  has started; ``placement`` once per worker/chief when its graph is finalized (or its first
  session is created), with the variables and shards on each ps and, in ``unattributed``,
  what sits on a ps but has no byte count (SyncReplicas accumulators, token queues) or a
  variable on no ps; ``initialized`` when a worker's ``SessionManager`` hands it a usable
  session; ``step`` about once a second while the global step moves, read beside the user's
  session (``local_step`` and ``step_time`` are this task's own: its ``Session.run`` calls
  of a train op, :mod:`trainer.shim.steps`, or the global step's moves when it built no
  train op the shim knows; ``loss`` is null: the shim cannot see the loss), and one step in
  N traced for ``step_anatomy``; ``done``
  (reason ``program_ended``) when the script returns normally or ``sys.exit(0)``; ``error``
  before a non-zero exit caused by an exception. The role and index come from the
  ``Server(...)`` call, else from ``TF_CONFIG``. TF2 (:mod:`trainer.shim.tf2`): the
  variables ``ParameterServerStrategy`` creates give ``placement`` (a ``ShardedVariable``'s
  parts as shards) at the first ``ClusterCoordinator.schedule``, which also gives
  ``initialized``; each scheduled function a worker finished is a step (``step`` events
  about once a second, the final count before ``done``), and every 5 s the coordinator's
  ``step_anatomy`` of its functions as it sees them (:mod:`trainer.shim.functions`).
- **stdin**: the line ``end`` ends the task inside ``server.join()`` with ``done`` (reason
  ``ended_in_join``) and exit 0: by hand join never returns, so nothing the program does
  after it runs; stdin EOF or the death of the parent process makes the
  task exit 143 (:mod:`trainer.lifecycle`). The shim owns stdin: a program that reads its
  own stdin does not get it.
- **Avoidable waits**: ``SessionManager``'s ``recovery_wait_secs`` (30 s: how long a
  non-chief sleeps before it looks again whether the chief has initialised the model) is
  capped at :data:`~trainer.shim.hooks.RECOVERY_WAIT_SECS`; what the program computes does
  not change.
- **Never break**: each hook is wrapped; one that fails prints one line
  ``tfdist shim: <what> failed: <why> (the program runs on)`` on stderr, once, and the
  program goes on as if the hook were not there. TensorFlow is not imported by the shim: the
  hooks are installed when the program imports ``tensorflow``, so a script without
  TensorFlow runs as it would alone.
- **Reporting module**: ``from tfdist_report import step, eval`` (in :data:`REPORT_DIR`,
  standard library only) lets a program report exact loss and accuracy; see its docstring.
"""

from __future__ import annotations

from pathlib import Path

#: How the controller starts the shim: ``python -c BOOTSTRAP script.py args...`` (or ``...
#: -m module args...``). Not ``python -m trainer.shim``: that puts the working folder first
#: on ``sys.path``, where a user's own package called ``trainer`` would shadow ours. The
#: working folder leaves the path, our ``trainer`` is found on ``PYTHONPATH``, and the shim
#: then hides itself (:mod:`trainer.shim.private`) before the program runs.
BOOTSTRAP = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
             "from trainer.shim.__main__ import main; main()")
#: The folder holding ``tfdist_report.py``; the controller puts it on ``PYTHONPATH``.
REPORT_DIR = Path(__file__).resolve().parent / "userlib"
