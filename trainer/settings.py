"""Training settings: the contract between the trainer's flags and the controller's
``training:`` section of hosts.yaml. Standard library only, so the controller can import it
to validate settings and build command lines without loading TensorFlow."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Model(str, Enum):
    """Model architectures, named after the seed programs they come from."""

    SOFTMAX = "softmax"
    MLP = "mlp"
    CNN = "cnn"
    CIFAR_CNN = "cifar_cnn"
    VGG19 = "vgg19"


class Dataset(str, Enum):
    """Training data sources. ``digits`` ships inside scikit-learn, so it works offline."""

    DIGITS = "digits"
    MNIST = "mnist"
    FASHION_MNIST = "fashion_mnist"
    CIFAR10 = "cifar10"
    SYNTHETIC = "synthetic"


class Optimizer(str, Enum):
    SGD = "sgd"
    RMSPROP = "rmsprop"
    ADAGRAD = "adagrad"
    ADAM = "adam"


class Mode(str, Enum):
    """``sync`` aggregates gradients with SyncReplicasOptimizer; ``async`` applies each
    worker's gradients as they arrive."""

    SYNC = "sync"
    ASYNC = "async"


class PlacementStrategy(str, Enum):
    """``round_robin`` is TensorFlow's default; ``greedy`` puts each variable (shard) on the
    ps holding the fewest bytes so far."""

    GREEDY = "greedy"
    ROUND_ROBIN = "round_robin"


@dataclass(frozen=True)
class TrainingSettings:
    """Everything that shapes a training run, with the trainer's defaults.

    Field names are the hosts.yaml keys; the trainer flag is the name with dashes."""

    model: Model = Model.MLP
    dataset: Dataset = Dataset.DIGITS
    data_path: str | None = None
    input_size: int | None = None
    batch_size: int = 64
    learning_rate: float = 0.05
    optimizer: Optimizer = Optimizer.SGD
    steps: int = 1000
    mode: Mode = Mode.ASYNC
    replicas_to_aggregate: int | None = None
    partitions: int = 1
    fuse: bool = True
    placement: PlacementStrategy = PlacementStrategy.GREEDY
    seed: int = 0
    checkpoint_dir: str | None = None
    checkpoint_every: int = 500
    summary_dir: str | None = None
    log_every: int = 100
    eval_every: int = 0
    gpus: int = 1
    hidden_units: int = 256

    def problems(self, num_workers: int | None = None) -> list[tuple[str, str]]:
        """Every invalid value as (field name, what was expected). Empty when valid."""
        found: list[tuple[str, str]] = []
        positive = ("batch_size", "steps", "partitions", "log_every", "gpus", "hidden_units",
                    "checkpoint_every")
        for name in positive:
            value = getattr(self, name)
            if value < 1:
                found.append((name, f"must be a positive integer, got {value}"))
        if self.eval_every < 0:
            found.append(("eval_every", f"must be 0 (off) or a positive integer, got {self.eval_every}"))
        if self.seed < 0:
            found.append(("seed", f"must be >= 0, got {self.seed}"))
        if not 0 < self.learning_rate < float("inf"):
            found.append(("learning_rate", f"must be > 0, got {self.learning_rate}"))
        if self.input_size is not None and self.input_size < 8:
            found.append(("input_size", f"must be >= 8, got {self.input_size}"))
        if self.replicas_to_aggregate is not None:
            if self.replicas_to_aggregate < 1:
                found.append(("replicas_to_aggregate",
                              f"must be a positive integer, got {self.replicas_to_aggregate}"))
            elif num_workers is not None and self.replicas_to_aggregate > num_workers:
                found.append(("replicas_to_aggregate",
                              f"must be at most the number of workers ({num_workers}), "
                              f"got {self.replicas_to_aggregate}"))
        if self.gpus >= 1 and self.batch_size >= 1 and self.batch_size % self.gpus:
            found.append(("batch_size",
                          f"must be divisible by gpus ({self.gpus}) so every tower gets an "
                          f"equal slice, got {self.batch_size}"))
        return found

    def to_argv(self) -> list[str]:
        """The trainer flags that reproduce these settings (defaults included, so a
        command line in the run directory is complete on its own)."""
        argv: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Enum):
                value = value.value
            if isinstance(value, bool):
                value = "true" if value else "false"
            argv += [flag_name(f.name), str(value)]
        return argv

    def replace(self, **changes: Any) -> TrainingSettings:
        """A copy with some fields changed (values are converted as from hosts.yaml)."""
        return dataclasses.replace(self, **{k: convert(k, v) for k, v in changes.items()})

    def effective_replicas(self, num_workers: int) -> int:
        return self.replicas_to_aggregate or num_workers


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


FIELD_TYPES: dict[str, Any] = {
    "model": Model, "dataset": Dataset, "optimizer": Optimizer, "mode": Mode,
    "placement": PlacementStrategy, "fuse": bool,
    "data_path": str, "checkpoint_dir": str, "summary_dir": str,
    "learning_rate": float,
    "input_size": int, "batch_size": int, "steps": int, "replicas_to_aggregate": int,
    "partitions": int, "seed": int, "checkpoint_every": int, "log_every": int,
    "eval_every": int, "gpus": int, "hidden_units": int,
}
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TrainingSettings))
assert set(FIELD_TYPES) == set(FIELD_NAMES)


def choices(field_name: str) -> tuple[str, ...] | None:
    """The allowed values of an enum-valued field, else None."""
    kind = FIELD_TYPES[field_name]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return tuple(m.value for m in kind)
    return None


#: How long a value may be in a message before it is shortened.
SHOWN_CHARS = 60
def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``value`` as it reads in a message: quoted, with control characters, terminal escapes,
    line breaks and lone surrogates escaped (so a message stays one harmless line), and
    shortened to ``limit`` characters with the full length said."""
    if not isinstance(value, str):
        return repr(value)  # numbers, booleans, None: already safe and short
    text = value
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


#: How a yes/no setting may be written on a command line.
_BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True,
               "false": False, "no": False, "off": False, "0": False}


def convert(field_name: str, value: Any) -> Any:
    """Convert one raw value (string from a flag, or a YAML scalar) to the field's type.
    Raises ValueError with a message saying what was expected."""
    kind = FIELD_TYPES[field_name]
    if value is None:
        return None
    if isinstance(kind, type) and issubclass(kind, Enum):
        allowed = choices(field_name) or ()
        if isinstance(value, Enum):
            value = value.value
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {shown(value)}")
        return kind(value)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()]
        raise ValueError(f"expected true or false, got {shown(value)}")
    if kind is int:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got {shown(value)}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ValueError(f"expected an integer, got {shown(value)}")
    if kind is float:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {shown(value)}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ValueError(f"expected a number, got {shown(value)}")
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"expected a string, got {shown(value)}")
    return str(value)


def add_arguments(parser: argparse._ActionsContainer) -> None:
    """Add one flag per setting. Values stay strings; :func:`from_namespace` converts."""
    defaults = TrainingSettings()
    for name in FIELD_NAMES:
        allowed = choices(name)
        default = getattr(defaults, name)
        if isinstance(default, Enum):
            default = default.value
        if isinstance(default, bool):
            default = "true" if default else "false"
        help_text = f"default: {default}" + (f"; one of {', '.join(allowed)}" if allowed else "")
        parser.add_argument(flag_name(name), dest=name, default=None, metavar=name.upper(),
                            help=help_text)


def from_namespace(ns: argparse.Namespace) -> TrainingSettings:
    """Build settings from parsed flags. Raises ValueError naming the flag on a bad value."""
    changes: dict[str, Any] = {}
    for name in FIELD_NAMES:
        raw = getattr(ns, name, None)
        if raw is None:
            continue
        try:
            changes[name] = convert(name, raw)
        except ValueError as exc:
            raise ValueError(f"{flag_name(name)}: {exc}") from None
    return dataclasses.replace(TrainingSettings(), **changes)
