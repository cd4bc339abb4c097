"""Real data sets read by the library from files that Debian packages install (nothing is
downloaded)."""

from typing import NamedTuple

import torch

from . import _C


class Split(NamedTuple):
    """A supervised data set: inputs (N, ...) float32 and targets (N) int64 class ids."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: int


def fashion_mnist(train_limit: int = 0, test_limit: int = 0) -> Split:
    """Fashion-MNIST from Debian's ``dataset-fashion-mnist`` (/usr/share/datasets/fashion-mnist, or
    the folder in FLT_FASHION_MNIST_DIR): images (N, 1, 28, 28) standardised by the training set's
    mean and standard deviation, the first ``limit`` examples of each part (0: all)."""
    return Split(**_C.data.fashion_mnist(train_limit, test_limit))
