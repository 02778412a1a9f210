"""The command lines of ``tfdist-tui export`` and ``tfdist-tui import``: arguments in, the
format's text out (:mod:`.export`, :mod:`.tfjob`, :mod:`.importer` make it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.config.load import load_config
from tui.config.yamlload import ConfigError
from tui.interop import textcommand
from tui.interop.export import (
    LEFT_OUT_NOTE,
    ExportFormat,
    export_ports,
    left_out_names,
    shell_script,
    tf_config_lines,
    tfjob_yaml,
)
from tui.interop.importer import hosts_yaml, read_input
from tui.interop.slurm_script import sbatch_script
from tui.interop.tfjob import ExportError, TFJobOptions, job_name_from


def export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui export",
        description="Print the cluster of HOSTS.yaml for another launcher: a Kubeflow TFJob, "
                    "each task's TF_CONFIG and command, shell commands to type by hand, or an "
                    "sbatch script for Slurm.")
    parser.add_argument("hosts", metavar="HOSTS.yaml", type=Path)
    parser.add_argument("--format", choices=[f.value for f in ExportFormat], default="tfjob")
    parser.add_argument("--image", default=TFJobOptions.image,
                        help=f"tfjob: the container image (default {TFJobOptions.image})")
    parser.add_argument("--name", help="tfjob: the job's name (default: from the file's name)")
    parser.add_argument("--namespace", default=TFJobOptions.namespace,
                        help="tfjob: the Kubernetes namespace (default: default)")
    parser.add_argument("--include-env", action="store_true",
                        help="tf-config, shell: write the values of hosts.yaml's env: too (left out "
                             "by default: they may be secrets; the tfjob format never has them)")
    textcommand.add_output_arguments(parser, "the export")
    return parser


def _export(args: argparse.Namespace) -> str:
    config = load_config(args.hosts)
    fmt = ExportFormat(args.format)
    if fmt is ExportFormat.TFJOB:
        name = args.name or job_name_from(args.hosts.stem)
        return tfjob_yaml(config, TFJobOptions(name, args.namespace, args.image))
    if names := left_out_names(config, args.include_env):
        print(LEFT_OUT_NOTE.format(names=", ".join(names)), file=sys.stderr)
    if fmt is ExportFormat.TF_CONFIG:
        return "\n".join(tf_config_lines(config, args.include_env)) + "\n"
    if fmt is ExportFormat.SLURM:
        return sbatch_script(config, export_ports(config))
    return shell_script(config, args.include_env)


def export_main(argv: list[str]) -> int:
    """``tfdist-tui export``; returns the exit code."""
    return textcommand.run(export_parser(), argv, _export, (ConfigError, ExportError))


def import_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdist-tui import",
        description="Write a hosts.yaml for a cluster given as a TF_CONFIG (JSON) or a Kubeflow "
                    "TFJob manifest (YAML).")
    parser.add_argument("source", metavar="FILE", type=Path)
    textcommand.add_output_arguments(parser, "the hosts.yaml")
    return parser


def import_main(argv: list[str]) -> int:
    """``tfdist-tui import``; returns the exit code."""
    return textcommand.run(import_parser(), argv,
                           lambda args: hosts_yaml(read_input(args.source), args.source), (ConfigError,))
