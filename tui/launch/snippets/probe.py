"""Remote probe: ``python -c SOURCE WORKDIR [no-tf|metadata]``. Reports this interpreter, the
workdir made absolute (``~`` expanded by the remote user's home), the home directory, and
TensorFlow's version (not looked for with ``no-tf``: the host's warm pool imports it anyway
and says its version, and a program run without the shim may not use it at all).

The version comes from the installed package's metadata: importing TensorFlow costs seconds
of CPU per host, which a cluster of many hosts pays before its first task starts. Only a
TensorFlow without metadata (a folder on PYTHONPATH) is imported to be found, and never with
``metadata`` (``tfdist-tui check``), which also adds the free disk space of the workdir (or
its nearest existing parent)."""

from __future__ import annotations

import json
import os
import sys

RESULT_PREFIX = "tfdist-result "


#: The names TensorFlow's builds are installed under (their metadata's ``Name``, normalised).
DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                 "tensorflow-macos", "tf-nightly", "tf-nightly-cpu", "intel-tensorflow")


def _installed_version() -> tuple[str | None, bool]:
    """TensorFlow's version from the metadata beside the package ``import tensorflow`` would
    load (found, not imported), and whether there is no such package at all. (None, False):
    found without metadata (a folder on PYTHONPATH), so only importing it can tell."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None, False
    if spec is None:
        return None, True
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        return None, False
    site = os.path.dirname(os.path.abspath(locations[0]))
    try:
        from importlib import metadata

        for dist in metadata.distributions(path=[site]):
            name = str(dist.metadata["Name"] or "").lower().replace("_", "-")
            if name in DISTRIBUTIONS and dist.version:
                return str(dist.version), False
    except Exception:  # unreadable metadata: importing tells
        pass
    return None, False


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
        import shutil

        version, missing = _installed_version()
        result["tf_version"] = version
        if missing:
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
    version, missing = _installed_version()
    if missing or version:
        if missing:
            result["tf_error"] = "ModuleNotFoundError: No module named 'tensorflow'"
        result["tf_version"] = version
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
