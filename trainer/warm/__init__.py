"""Warm start: a fork server that imports TensorFlow once per host and forks each
task from it, so a start, a restart or a relaunch does not pay the 4-15 s import again.

``python -m trainer.warm MODE`` (MODE ``trainer`` or ``shim``) imports TensorFlow the way
that kind of task would, without creating a device, an eager context or a session; listens
on a unix socket in a private (0700) folder; prints one ``ready`` JSON line on stdout; and
serves until its stdin reaches EOF or its parent dies (then its tasks die with it).

The wire (:mod:`trainer.warm.wire`): a client connects, sends one request (argv, env, cwd)
with the task's stdin/stdout/stderr as SCM_RIGHTS, and reads JSON lines back: ``pid`` once
the task is forked (or ``refused`` with a reason: the client then starts the task cold),
later ``exit`` with the status as :attr:`subprocess.Popen.returncode` writes it.

What a task reads when (measured on TensorFlow 2.21, CPU; :data:`IMPORT_TIME_ENV`):

- *latched at import*: ``TF_CPP_MIN_LOG_LEVEL`` (a child that changes it keeps the pool's
  level), ``TF_ENABLE_ONEDNN_OPTS`` (its banner is printed by the import), the OpenBLAS pool
  size numpy loads (``OPENBLAS_NUM_THREADS``) and every variable Python reads at start-up
  (``PYTHONHASHSEED``, ``PYTHONWARNINGS``, ...) and the dynamic loader's (``LD_PRELOAD``).
  A task whose value differs from the pool's is refused and starts cold;
- *read at first use*, so each forked task gets its own: ``TF_NUM_INTRAOP_THREADS`` /
  ``TF_NUM_INTEROP_THREADS`` (the pools of the first session: a child with 2 inter-op
  threads has 2 ``tf_Compute`` threads, one with 1 has 1), ``CUDA_VISIBLE_DEVICES`` and
  ``TF_FORCE_GPU_ALLOW_GROWTH`` (``cuInit`` runs when the first session is made, never in
  the pool), ``TF_CONFIG``, the trainer's own variables;
- *choosing what is imported* (:data:`IMPORT_CHOOSING_ENV`): ``TF_USE_LEGACY_KERAS`` (which
  Keras ``tensorflow.keras`` is: TensorFlow fixes its package path when it is imported, so a
  pool imported without it gives Keras 3 to ``from tensorflow.keras import ...``),
  ``KERAS_BACKEND``, ``TF_USE_MODULAR_FILESYSTEM``: part of the pool key, so
  such a task forks from a pool imported with its values. A program that sets one itself
  (``os.environ[...]`` before its ``import tensorflow``) starts cold, with a notice: the pool
  imported TensorFlow before the program could;
- ``OMP_NUM_THREADS``: read by OpenMP and OpenBLAS when they load (at import), so the child
  re-applies it at run time (threadpoolctl); without threadpoolctl it is latched.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The modes: which module a forked task runs as ``__main__``.
MODES: dict[str, str] = {"trainer": "trainer", "shim": "trainer.shim"}

#: Environment variables read when the interpreter or TensorFlow starts, not when a task
#: first uses them: a pool serves only tasks that agree with it on each (see above).
IMPORT_TIME_ENV: tuple[str, ...] = (
    "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE", "ABSL_MIN_LOG_LEVEL",
    "TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "GRPC_VERBOSITY",
    "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS",
    "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONOPTIMIZE", "PYTHONMALLOC", "PYTHONUTF8",
    "PYTHONIOENCODING", "PYTHONDEVMODE", "PYTHONFAULTHANDLER", "PYTHONHOME",
    "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "MALLOC_ARENA_MAX",
    "TF_USE_LEGACY_KERAS", "KERAS_BACKEND", "TF_USE_MODULAR_FILESYSTEM",
)

#: Of :data:`IMPORT_TIME_ENV`, those that change which modules TensorFlow or Keras load (not
#: only how they log): a program that sets one of them itself cannot be forked from a pool
#: that imported TensorFlow without it.
IMPORT_CHOOSING_ENV: tuple[str, ...] = (
    "TF_USE_LEGACY_KERAS", "KERAS_BACKEND", "TF_USE_MODULAR_FILESYSTEM")

#: What the built-in trainer sets before it imports TensorFlow unless ``--verbose``
#: (:func:`trainer.tfimport.import_tf`): its pool imports with the same values.
TRAINER_QUIET_ENV: dict[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "2", "ABSL_MIN_LOG_LEVEL": "2", "GRPC_VERBOSITY": "ERROR"}

#: In the pool's own environment (and so in /proc/PID/environ of every task it forks, which
#: keeps the environment a process was exec'd with): the leftover sweep finds pools and
#: their tasks by the run-id variable, and this names the pool.
POOL_RUN_ID = "warm-pool"
#: The stderr line of a task that could not be warm-started and started cold instead.
COLD_NOTICE = "tfdist warm: started cold: "
#: Set in the pool's environment only; removed from each task's.
POOL_ENV = "TFDIST_WARM_POOL"
#: Room in the environment block the server was exec'd with, which /proc/PID/environ shows:
#: a forked task writes its own environment there (:mod:`trainer.warm.child`). The server
#: re-execs itself once with it at start-up.
ROOM_ENV = "TFDIST_WARM_ROOM"
#: Bytes of room beyond the server's own environment.
ROOM_BYTES = 64 * 1024


def effective_import_env(mode: str, argv: list[str] | tuple[str, ...],
                         env: Mapping[str, str]) -> dict[str, str | None]:
    """The values of :data:`IMPORT_TIME_ENV` a task would import TensorFlow with: its own,
    plus the trainer's quiet defaults for a trainer task without ``--verbose``."""
    values: dict[str, str | None] = {name: env.get(name) for name in IMPORT_TIME_ENV}
    if mode == "trainer" and "--verbose" not in argv:
        for name, value in TRAINER_QUIET_ENV.items():
            if values.get(name) is None:
                values[name] = value
    return values


def pool_key(mode: str, argv: list[str] | tuple[str, ...], env: Mapping[str, str]) -> str:
    """Tasks with equal keys can share one pool."""
    values = effective_import_env(mode, argv, env)
    return mode + "|" + "|".join(f"{k}={v}" for k, v in sorted(values.items()) if v is not None)
