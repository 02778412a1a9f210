"""Remote probe: ``python -c SOURCE WORKDIR [no-tf|metadata]``. Reports this interpreter, the
workdir made absolute (``~`` expanded by the remote user's home), the home directory, and
whether TensorFlow imports (not tried with ``no-tf``: the host's warm pool imports it anyway,
and says its version). With ``metadata`` (``tfdist-tui check``) nothing is imported: the
installed TensorFlow's version is read from its package metadata, and the free disk space of
the workdir (or its nearest existing parent) is added."""

from __future__ import annotations

import json
import os
import sys

RESULT_PREFIX = "tfdist-result "


def main(argv: list[str]) -> None:
    workdir = os.path.abspath(os.path.expanduser(argv[0])) if argv else ""
    result: dict[str, object] = {
        "python": sys.executable,
        "python_version": ".".join(str(v) for v in sys.version_info[:3]),
        "workdir": workdir,
        "home": os.path.expanduser("~"),
        "tf_version": None,
        "tf_error": None,
    }
    sys.stdout.flush()
    if argv[1:] == ["metadata"]:
        import importlib.metadata
        import shutil

        try:
            result["tf_version"] = importlib.metadata.version("tensorflow")
        except importlib.metadata.PackageNotFoundError:
            result["tf_error"] = "no tensorflow package is installed"
        folder = workdir or os.getcwd()
        while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
            folder = os.path.dirname(folder)
        result["disk_folder"] = folder
        result["disk_free"] = shutil.disk_usage(folder).free
    if argv[1:] in (["no-tf"], ["metadata"]):
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # quiet start-up banners on stderr
    try:
        import tensorflow

        result["tf_version"] = str(tensorflow.__version__)
    except BaseException as exc:  # ImportError, or TensorFlow's own start-up failing
        result["tf_error"] = f"{type(exc).__name__}: {exc}".strip()
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()
    # TensorFlow's exit handlers can take seconds; the answer is out.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
