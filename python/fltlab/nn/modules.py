"""The library's modules as torch.nn.Modules.

Each wraps the library's own module (flt::attention::FLTAttention, ...). Its parameters and buffers
are the library module's tensors themselves, registered here under the library's names (dotted names
become submodules: ``rpe.weights``): the Python objects of those tensors are made
``torch.nn.Parameter``s, so PyTorch's optimizers, ``state_dict``, ``.to()``/``.double()`` and
autograd see exactly what the library computes with, and nothing is copied at a call.
Replacing a parameter object (``module.rpe.weights = nn.Parameter(...)``) would cut that link; set
its data instead (``load_state_dict`` and optimizers do).
"""

import copy
from typing import Optional

import torch
from torch import nn

from .. import _C


class _Holder(nn.Module):
    """A library submodule's place in the tree: it holds that submodule's parameters and buffers."""

    def forward(self, *args, **kwargs):
        raise RuntimeError("a part of a fltlab module is not called on its own")

    def _get_name(self):
        return "Tensors"  # repr: "(rpe): Tensors(weights: [8, 3])", not the private class name

    def extra_repr(self):
        named = list(self._parameters.items()) + list(self._buffers.items())
        return ", ".join(f"{name}: {list(t.shape)}" for name, t in named if t is not None)


def _rebuild(cls, args, state, training):
    module = cls(**args)
    module.load_state_dict(state)
    module.train(training)
    return module


class _LibraryModule(nn.Module):
    """Base of the wrappers: adopts the library module's tensors, keeps them shared with it."""

    def __init__(self, cpp, args):
        super().__init__()
        self._cpp = cpp
        self._args = dict(args)
        for name, tensor in cpp.named_parameters():
            tensor.__class__ = nn.Parameter  # the library's tensor itself, as a Parameter
            owner, leaf = self._owner(name, create=True)
            owner.register_parameter(leaf, tensor)
        for name, tensor in cpp.named_buffers():
            owner, leaf = self._owner(name, create=True)
            owner.register_buffer(leaf, tensor)

    def _owner(self, name, create=False):
        *path, leaf = name.split(".")
        owner = self
        for part in path:
            child = owner._modules.get(part)
            if child is None:
                if not create:
                    raise KeyError(name)
                child = _Holder()
                owner.add_module(part, child)
            owner = child
        return owner, leaf

    def _apply(self, fn):
        # nn.Module._apply keeps a parameter's identity (param.data = fn(param)) but replaces
        # buffers (and parameters when it cannot set their data): the library's tensors take the
        # new data, and stay the ones registered here.
        super()._apply(fn)
        for kind, items in (("_parameters", self._cpp.named_parameters()),
                            ("_buffers", self._cpp.named_buffers())):
            for name, tensor in items:
                owner, leaf = self._owner(name)
                current = getattr(owner, kind)[leaf]
                if current is not tensor and current is not None:
                    self._cpp.set_data(name, current)
                    getattr(owner, kind)[leaf] = tensor
        return self

    def train(self, mode: bool = True):
        super().train(mode)
        self._cpp.train(mode)
        return self

    def extra_repr(self):
        return repr(self._cpp)

    # Copies and pickles rebuild the library module from the constructor's arguments, then load
    # the parameters and buffers (random features included).
    def __reduce_ex__(self, protocol):
        state = {k: v.detach().clone() for k, v in self.state_dict().items()}
        return (_rebuild, (type(self), self._args, state, self.training))

    def __deepcopy__(self, memo):
        return _rebuild(type(self), copy.deepcopy(self._args, memo),
                        {k: v.detach().clone() for k, v in self.state_dict().items()},
                        self.training)


class _Attention(_LibraryModule):
    """An attention variant: forward(q, k, v, causal=False, positions=None) with q, k (B, H, L, D),
    v (B, H, L, Dv) -> (B, H, L, Dv); positions (L, l) or (B, L, l) for variants with relative
    positional encodings (token indices when None)."""

    _variant = ""

    def __init__(self, **options):
        super().__init__(_C.attention(self._variant, options), options)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._cpp.forward(q, k, v, causal, positions)

    def materialize(self, q: torch.Tensor, k: torch.Tensor, causal: bool = False,
                    positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The (approximate) attention matrix (B, H, Lq, Lk) whose product with v is forward's."""
        return self._cpp.materialize(q, k, causal, positions)


class SoftmaxAttention(_Attention):
    """Exact softmax attention. Options: scale (0: 1/sqrt(D)), heads, head_dim."""
    _variant = "softmax"


class LinearAttention(_Attention):
    """Linear attention with elu + 1 features. Options: eps, heads, head_dim."""
    _variant = "linear"


class PerformerAttention(_Attention):
    """Performer (FAVOR+). Options: head_dim (needed), features=64, kind="positive",
    orthogonal=True, seed=0, heads, eps."""
    _variant = "performer"

    def redraw(self, seed: int) -> None:
        self._cpp.redraw(seed)


class FourierAttention(_Attention):
    """FourierFormer attention. Options: r_init=0 (R matched to softmax's temperature from the head
    dim: fourier_softmax_matched_r), r_shape="scalar" ("per_dimension",
    "per_head", "per_head_dimension"), learn_r=True, power=4, phi="power", heads, head_dim."""
    _variant = "fourier"


class FLTAttention(_Attention):
    """FLT: FAVOR+ with a learned relative positional encoding given through its spectrum. Options:
    heads and head_dim (needed), features=64, rpe_features=32, position_dim=1,
    family="gaussian_mixture", components=2, smoothness=1, rpe_scale=0.1, rpe_weight=1.0,
    proposal="gaussian", proposal_sigma=1.0, learn_proposal=False, kind="positive", seed=0, eps."""
    _variant = "flt"

    def redraw(self, seed: int) -> None:
        self._cpp.redraw(seed)

    def rpe_function(self, delta: torch.Tensor) -> torch.Tensor:
        """The learned RPE f at offsets, per head. delta: (N, l) -> (H, N)"""
        return self._cpp.rpe_function(delta)

    def exact_mask(self, positions: torch.Tensor) -> torch.Tensor:
        """N = f(r_i - r_j). positions: (L, l) or (B, L, l) -> (B, H, L, L)"""
        return self._cpp.exact_mask(positions)


class SchoenbAttention(_Attention):
    """SchoenbAt. Options: heads and head_dim (needed), kernel="exp", features=64, max_degree=8,
    ppsbn=True, sbn_eps, normaliser_floor=0.5, gamma=1.0, beta=1.0, seed=0."""
    _variant = "schoenbat"

    def redraw(self, seed: int) -> None:
        self._cpp.redraw(seed)


class FeatureMap(_LibraryModule):
    """The random-feature map of Performer and FLT (for functional.performer_attention)."""

    def __init__(self, input_dim: int, features: int, kind: str = "positive",
                 orthogonal: bool = True, seed: int = 0):
        args = dict(input_dim=input_dim, features=features, kind=kind, orthogonal=orthogonal,
                    seed=seed)
        super().__init__(_C.feature_map(**args), args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Query features (per-token shift). x: (..., L, input_dim) -> (..., L, M)"""
        return self._cpp.query_features(x)

    def key_features(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        return self._cpp.key_features(x, causal)

    def redraw(self, seed: int) -> None:
        self._cpp.redraw(seed)


class MultiheadAttention(_LibraryModule):
    """Multi-head attention around any variant: MultiheadAttention(embed_dim, heads,
    attention="flt", bias=True, **options of the variant). forward(x (B, L, E), causal=False,
    positions=None) -> (B, L, E)."""

    def __init__(self, embed_dim: int, heads: int, attention: str = "softmax", bias: bool = True,
                 **options):
        args = dict(embed_dim=embed_dim, heads=heads, attention=attention, bias=bias, **options)
        super().__init__(_C.multihead_attention(embed_dim, heads, attention, bias, options), args)

    def forward(self, x: torch.Tensor, causal: bool = False,
                positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._cpp.multihead_forward(x, causal, positions)

    def attention_weights(self, x: torch.Tensor, causal: bool = False,
                          positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Every head's attention matrix. x: (B, L, E) -> (B, H, L, L)"""
        return self._cpp.multihead_attention_weights(x, causal, positions)


class TransformerLM(_LibraryModule):
    """Causal pre-LN transformer language model: TransformerLM(vocab_size, embed_dim, heads,
    layers, max_length=0, ff_dim=0, attention="softmax", tie_weights=True, share_rpe=False,
    **options of the variant). forward(tokens (B, L) int64) -> logits (B, L, vocab_size)."""

    def __init__(self, vocab_size: int, embed_dim: int, heads: int, layers: int,
                 max_length: int = 0, ff_dim: int = 0, attention: str = "softmax",
                 tie_weights: bool = True, share_rpe: bool = False, **options):
        args = dict(vocab_size=vocab_size, embed_dim=embed_dim, heads=heads, layers=layers,
                    max_length=max_length, ff_dim=ff_dim, attention=attention,
                    tie_weights=tie_weights, share_rpe=share_rpe, **options)
        super().__init__(_C.transformer_lm(vocab_size, embed_dim, heads, layers, max_length,
                                           ff_dim, tie_weights, share_rpe, attention, options),
                         args)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._cpp.lm_forward(tokens)

    def attention_maps(self, tokens: torch.Tensor):
        """Per layer (B, H, L, L), causal."""
        return self._cpp.lm_attention_maps(tokens)
