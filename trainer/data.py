"""Datasets as in-memory numpy arrays: the embedded offline default (scikit-learn's digits),
local files or the Keras cache for the classic image sets, and synthetic data.

Images are float32 in [0, 1], shaped (N, height, width, channels); labels are int64."""

from __future__ import annotations

import functools
import gzip
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainer.settings import Dataset, Model, TrainingSettings

NUM_CLASSES = 10

_DATASET_SHAPES: dict[Dataset, tuple[int, int, int]] = {
    Dataset.DIGITS: (8, 8, 1),
    Dataset.MNIST: (28, 28, 1),
    Dataset.FASHION_MNIST: (28, 28, 1),
    Dataset.CIFAR10: (32, 32, 3),
}

# The input each model was written for in its seed program; synthetic data uses it.
_MODEL_SHAPES: dict[Model, tuple[int, int, int]] = {
    Model.SOFTMAX: (28, 28, 1),
    Model.MLP: (28, 28, 1),
    Model.CNN: (28, 28, 1),
    Model.CIFAR_CNN: (24, 24, 3),
    Model.VGG19: (224, 224, 3),
}


class DatasetMissing(Exception):
    """The requested dataset is not on this machine."""


@dataclass(frozen=True)
class Split:
    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class Data:
    train: Split
    test: Split


def input_shape(settings: TrainingSettings) -> tuple[int, int, int]:
    """The (height, width, channels) of one example, known without loading anything, so
    ``trainer plan`` can size the model's variables."""
    if settings.dataset is Dataset.SYNTHETIC:
        height, width, channels = _MODEL_SHAPES[settings.model]
        if settings.input_size is not None:
            height = width = settings.input_size
        return height, width, channels
    return _DATASET_SHAPES[settings.dataset]


def load(settings: TrainingSettings) -> Data:
    """Load the configured dataset. Raises :class:`DatasetMissing` with the places looked."""
    if settings.dataset is Dataset.DIGITS:
        return _digits()
    if settings.dataset is Dataset.SYNTHETIC:
        return _synthetic(input_shape(settings), settings.batch_size, settings.seed)
    return _from_files(settings.dataset, settings.data_path)


def preload() -> None:
    """Load the default dataset (digits) now, in a warm pool: the tasks it forks then share
    the arrays instead of each parsing the file again (40-60 ms of a worker's start)."""
    _digits()


@functools.cache
def _digits() -> Data:
    """Once a process: the arrays are read-only, so every caller (and every forked task) can
    share them."""
    from sklearn.datasets import load_digits  # local: scikit-learn is slow to import

    bunch = load_digits()
    images = (bunch.images.astype(np.float32) / 16.0)[..., np.newaxis]
    labels = bunch.target.astype(np.int64)
    # A fixed shuffle before the split, independent of --seed, so "held-out" always means
    # the same 20% of the examples.
    order = np.random.default_rng(20161027).permutation(len(labels))
    images, labels = images[order], labels[order]
    cut = int(len(labels) * 0.8)
    for array in (images, labels):
        array.flags.writeable = False
    return Data(Split(images[:cut], labels[:cut]), Split(images[cut:], labels[cut:]))


def _synthetic(shape: tuple[int, int, int], batch_size: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)

    def split(n: int) -> Split:
        images = rng.random((n, *shape), dtype=np.float32)
        return Split(images, rng.integers(0, NUM_CLASSES, size=n).astype(np.int64))

    return Data(split(max(4 * batch_size, 64)), split(max(batch_size, 64)))


def _keras_cache() -> Path:
    return Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets"


def _from_files(dataset: Dataset, data_path: str | None) -> Data:
    looked: list[str] = []
    candidates: list[Path] = []
    if data_path:
        candidates.append(Path(data_path).expanduser())
    else:
        cache = _keras_cache()
        candidates += {
            Dataset.MNIST: [cache / "mnist.npz"],
            Dataset.FASHION_MNIST: [cache / "fashion_mnist.npz", cache / "fashion-mnist"],
            Dataset.CIFAR10: [cache / "cifar10.npz", cache / "cifar-10-batches-py"],
        }[dataset]
    for path in candidates:
        looked.append(str(path))
        if path.is_file() and path.suffix == ".npz":
            return _from_npz(path, _DATASET_SHAPES[dataset])
        if path.is_dir() and dataset is Dataset.FASHION_MNIST:
            return _from_idx_dir(path)
        if path.is_dir() and dataset is Dataset.CIFAR10:
            return _from_cifar_dir(path)
    raise DatasetMissing(
        f"dataset {dataset.value} not found (looked in {', '.join(looked)}); pass --data-path "
        "with an .npz holding x_train, y_train, x_test, y_test, or use --dataset digits")


def _normalise(images: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    images = images.astype(np.float32)
    if images.max(initial=0.0) > 1.0:
        images /= 255.0
    return images.reshape((-1, *shape))


def _from_npz(path: Path, shape: tuple[int, int, int]) -> Data:
    try:
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    except (KeyError, OSError, ValueError) as exc:
        raise DatasetMissing(f"{path} is not a usable dataset file: {exc}") from None
    return Data(
        Split(_normalise(arrays["x_train"], shape), arrays["y_train"].reshape(-1).astype(np.int64)),
        Split(_normalise(arrays["x_test"], shape), arrays["y_test"].reshape(-1).astype(np.int64)),
    )


def _from_idx_dir(path: Path) -> Data:
    def read(name: str, offset: int) -> np.ndarray:
        with gzip.open(path / name, "rb") as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)

    try:
        train = Split(_normalise(read("train-images-idx3-ubyte.gz", 16), (28, 28, 1)),
                      read("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
        test = Split(_normalise(read("t10k-images-idx3-ubyte.gz", 16), (28, 28, 1)),
                     read("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    except OSError as exc:
        raise DatasetMissing(f"{path} is not a usable fashion-mnist directory: {exc}") from None
    return Data(train, test)


def _from_cifar_dir(path: Path) -> Data:
    def batch(name: str) -> tuple[np.ndarray, np.ndarray]:
        with open(path / name, "rb") as f:
            d = pickle.load(f, encoding="bytes")
        images = np.asarray(d[b"data"]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, np.asarray(d[b"labels"], dtype=np.int64)

    try:
        parts = [batch(f"data_batch_{i}") for i in range(1, 6)]
        test_x, test_y = batch("test_batch")
    except (OSError, KeyError, pickle.UnpicklingError) as exc:
        raise DatasetMissing(f"{path} is not a usable cifar-10 directory: {exc}") from None
    train_x = np.concatenate([p[0] for p in parts])
    train_y = np.concatenate([p[1] for p in parts])
    return Data(Split(_normalise(train_x, (32, 32, 3)), train_y),
                Split(_normalise(test_x, (32, 32, 3)), test_y))
