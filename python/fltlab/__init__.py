"""FLT Lab from Python: the learned optimizer Mnemosyne, the population optimizer Swarm and every
attention variant of the C++ library (libflt), for PyTorch.

    import fltlab
    optimizer = fltlab.optim.Mnemosyne(model.parameters())
    attention = fltlab.nn.FLTAttention(heads=4, head_dim=16)

The package is a thin layer over the library: the optimizers' steps and the attention's forward and
backward passes are the library's own code, on the tensors PyTorch owns. The library's errors
arrive as RuntimeError with its message.
"""

import torch  # noqa: F401  (loads libtorch_python, which fltlab._C links against)

from . import _C
from . import data, distributed, nn, optim

__version__ = _C.version()

__all__ = ["data", "distributed", "nn", "optim", "__version__"]
