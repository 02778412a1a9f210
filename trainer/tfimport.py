"""Import TensorFlow quietly, in graph mode.

TensorFlow prints oneDNN banners, CUDA probes and deprecation warnings on import; a task's
log should hold what the task did, so that noise is off unless ``--verbose`` is given."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import warnings
from collections.abc import Iterator
from types import ModuleType

_tf: ModuleType | None = None


def import_tf(verbose: bool = False) -> ModuleType:
    """Return ``tensorflow.compat.v1`` with v2 behaviour disabled. Idempotent."""
    global _tf
    if _tf is not None:
        return _tf
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "2")
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
    with collector_paused():
        import tensorflow as tf

    if not verbose:
        tf.get_logger().setLevel(logging.CRITICAL)
        from tensorflow.python.util import deprecation

        deprecation._PRINT_DEPRECATION_WARNINGS = False
    tf1 = tf.compat.v1
    tf1.disable_v2_behavior()
    _tf = tf1
    return tf1


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body (an import) without the cyclic garbage collector, then freeze what it made.

    Importing TensorFlow allocates a few hundred thousand long-lived objects; the collector's
    passes over that growing heap are a fifth of the import's CPU (0.5 s of 2.7 here), and
    one full pass afterwards costs 0.25 s. Nearly all of it lives as long as the process
    (modules, classes, functions; a few thousand objects are garbage), so it is frozen:
    later collections skip it, and in a warm pool a forked task's collections never walk,
    and so copy, the pool's pages. A no-op where the collector is already off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def tf_version() -> str:
    import tensorflow as tf

    return str(tf.__version__)
