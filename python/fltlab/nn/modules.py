"""The library's modules as torch.nn.Modules.

Each wraps the library's own module (flt::attention::FLTAttention, ...), which does the computing:
one copy of each forward, the library's. The wrapper's parameters are ordinary ``nn.Parameter``s
made here with the library's initial values, under the library's names (dotted names become
submodules: ``rpe.weights``); its buffers are the library's tensors. At every call the library's
tensors are pointed at the wrapper's current ones (no copy), and ``_LibraryCall``, an
``autograd.Function``, hands the gradients the library computes for its own tensors to the
wrapper's parameters. So PyTorch's optimizers, ``state_dict``, ``.to()``/``.double()``, deep copies
and replacing a parameter (``module.rpe.weights = nn.Parameter(...)``) work as on any module.
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


def _run_library(call, args, inputs):
    """call(args) with the tensors among args replaced by `inputs`, with grad -> its outputs as a
    tuple, and whether it returned one tensor."""
    it = iter(inputs)
    with torch.enable_grad():
        outputs = call(*[next(it) if isinstance(a, torch.Tensor) else a for a in args])
    single = isinstance(outputs, torch.Tensor)
    return ((outputs,) if single else tuple(outputs)), single


class _LibraryCall(torch.autograd.Function):
    """A library call whose gradients reach the Python module's parameters: the forward runs the
    library (with grad) on detached inputs, its tensors already pointed at the parameters' data;
    the backward differentiates that inner graph with respect to the inputs and the library's
    tensors and returns the latter as the parameters' gradients.

    The inner graph is freed by the first backward, as an ordinary graph is; a second backward
    through the same call (retain_graph=True, gradcheck's several) recomputes it first, from the
    saved inputs and parameters (as torch.utils.checkpoint does)."""

    @staticmethod
    def forward(ctx, call, args, library_tensors, *inputs_and_params):
        count = len(inputs_and_params) - len(library_tensors)
        inputs = [t.detach().requires_grad_(t.requires_grad) for t in inputs_and_params[:count]]
        outputs, single = _run_library(call, args, inputs)
        ctx.call, ctx.args, ctx.count = call, args, count
        ctx.params = inputs_and_params[count:]
        ctx.inner = outputs
        ctx.targets = inputs + list(library_tensors)
        ctx.wanted = [t.requires_grad for t in inputs_and_params]
        detached = tuple(o.detach() for o in outputs)
        ctx.mark_non_differentiable(*[d for d, o in zip(detached, outputs) if not o.requires_grad])
        return detached[0] if single else detached

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        if ctx.inner is None:  # a second backward: the graph again, as it was at the forward
            for library, param in zip(ctx.targets[ctx.count:], ctx.params):
                library.data = param
            ctx.inner = _run_library(ctx.call, ctx.args, ctx.targets[:ctx.count])[0]
        pairs = [(o, g) for o, g in zip(ctx.inner, grads) if o.requires_grad and g is not None]
        wanted = [i for i, w in enumerate(ctx.wanted) if w and ctx.targets[i].requires_grad]
        found = [None] * len(ctx.targets)
        if pairs and wanted:
            outputs, output_grads = zip(*pairs)
            results = torch.autograd.grad(outputs, [ctx.targets[i] for i in wanted],
                                          output_grads, allow_unused=True)
            for i, g in zip(wanted, results):
                found[i] = g
        ctx.inner = None
        return (None, None, None, *found)


class _LibraryModule(nn.Module):
    """Base of the wrappers: ordinary parameters, the library's buffers, every library call made
    with them (``_call``)."""

    def __init__(self, cpp, args):
        super().__init__()
        self._cpp = cpp
        self._args = dict(args)
        self._library_parameters = cpp.named_parameters()  # [(name, the library's tensor)]
        self._library_buffers = cpp.named_buffers()
        for name, tensor in self._library_parameters:
            owner, leaf = self._owner(name, create=True)
            owner.register_parameter(
                leaf, nn.Parameter(tensor.detach().clone(), requires_grad=tensor.requires_grad))
        for name, tensor in self._library_buffers:
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

    def _bind(self):
        """Points the library's tensors at this module's current ones (after .to(), a replaced
        parameter, load_state_dict: whatever they are now); returns the parameters in the
        library's order."""
        params = []
        for name, tensor in self._library_parameters:
            owner, leaf = self._owner(name)
            param = getattr(owner, leaf)  # a Parameter, or what functional_call put there
            if param is not tensor:
                tensor.data = param
            params.append(param)
        for name, tensor in self._library_buffers:
            owner, leaf = self._owner(name)
            buffer = getattr(owner, leaf)
            if buffer is not tensor:
                tensor.data = buffer
        return params

    def _call(self, method, *args):
        """The library module's `method` (a name, or a function of the args) on args (tensors and
        options), with this module's parameters, differentiable in the tensors among args and in
        the parameters."""
        params = self._bind()
        call = getattr(self._cpp, method) if isinstance(method, str) else method
        method = method if isinstance(method, str) else method.__name__
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        try:
            if not torch.is_grad_enabled() or not any(t.requires_grad for t in inputs + params):
                with torch.no_grad():
                    return call(*args)
            library = [tensor for _, tensor in self._library_parameters]
            return _LibraryCall.apply(call, args, library, *inputs, *params)
        except TypeError as error:
            # pybind11's message lists the arguments' reprs (whole tensors): name their types.
            text = str(error)
            if "incompatible function arguments" not in text:
                raise
            given = ", ".join(f"Tensor{list(a.shape)} {a.dtype}" if isinstance(a, torch.Tensor)
                              else repr(a) for a in args)
            signature = text.split("Invoked with")[0].strip()
            raise TypeError(f"{type(self).__name__}.{method}: arguments of the wrong type: "
                            f"({given}); {signature}") from None

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


class _RandomFeatures:
    """What the modules with random features add: redraw(seed) draws them anew (the library writes
    them in place, into the buffers this module holds)."""

    def redraw(self, seed: int) -> None:
        self._bind()
        with torch.no_grad():
            self._cpp.redraw(seed)


class _Attention(_LibraryModule):
    """An attention variant: forward(q, k, v, causal=False, positions=None) with q, k (B, H, L, D),
    v (B, H, L, Dv) -> (B, H, L, Dv); positions (L, l) or (B, L, l) for variants with relative
    positional encodings (token indices when None).

    Every variant takes ``heads`` and ``head_dim`` (0: set by the container, MultiheadAttention or
    TransformerLM; a module used alone that needs them says so), its own options as keywords with
    the library's defaults (flt::attention::<Variant>Options), and ``device`` and ``dtype`` for its
    parameters and buffers, as torch.nn modules do. Bad values raise RuntimeError naming them."""

    _variant = ""

    def _make(self, options, device, dtype):
        super().__init__(_C.attention(self._variant, options),
                         dict(options, device=device, dtype=dtype))
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._call("forward", q, k, v, causal, positions)

    def materialize(self, q: torch.Tensor, k: torch.Tensor, causal: bool = False,
                    positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The (approximate) attention matrix (B, H, Lq, Lk) whose product with v is forward's."""
        return self._call("materialize", q, k, causal, positions)


class SoftmaxAttention(_Attention):
    """Exact softmax attention, the reference.

    Args:
        heads, head_dim: see the variants' common arguments (fltlab.nn.modules._Attention).
        scale: the scores' factor (0: 1/sqrt(head_dim)).
    """
    _variant = "softmax"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, scale: float = 0.0, device=None,
                 dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, scale=scale), device, dtype)


class LinearAttention(_Attention):
    """Linear attention with elu + 1 features (Katharopoulos et al. 2020).

    Args:
        eps: the floor of the normaliser.
    """
    _variant = "linear"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, eps: float = 1e-6, device=None,
                 dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, eps=eps), device, dtype)


class PerformerAttention(_RandomFeatures, _Attention):
    """Performer, FAVOR+ (Choromanski et al. 2021). Needs head_dim when used alone.

    Args:
        features: random features m.
        kind: the feature map: "positive", "hyperbolic", "trigonometric", "relu" or "learnable".
        orthogonal: orthogonal random projections.
        seed: the features' draw.
        eps: the floor of the normaliser.
    """
    _variant = "performer"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, features: int = 64,
                 kind: str = "positive", orthogonal: bool = True, seed: int = 0,
                 eps: float = 1e-30, device=None, dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, features=features, kind=kind,
                        orthogonal=orthogonal, seed=seed, eps=eps), device, dtype)


class FourierAttention(_Attention):
    """FourierFormer attention (Nguyen et al. 2022).

    Args:
        r_init: R's initial value (0: matched to softmax's temperature from the head dim,
            fourier_softmax_matched_r).
        r_shape: "scalar", "per_dimension", "per_head" or "per_head_dimension".
        learn_r: R is a parameter (else a buffer).
        power: the power p of phi.
        phi: "power", "abs", "relu" or "sigmoid".
    """
    _variant = "fourier"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, r_init: float = 0.0,
                 r_shape: str = "scalar", learn_r: bool = True, power: int = 4,
                 phi: str = "power", device=None, dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, r_init=r_init, r_shape=r_shape,
                        learn_r=learn_r, power=power, phi=phi), device, dtype)


class FLTAttention(_RandomFeatures, _Attention):
    """FLT: FAVOR+ with a learned relative positional encoding given through its spectrum
    (Choromanski, Li et al. 2024). Needs heads and head_dim when used alone.

    Args:
        features: random features m of the queries and keys.
        rpe_features: random features r of the RPE.
        position_dim: the positions' dimension l.
        family: the spectrum: "gaussian_mixture", "local", "gaussian_kernel", "laplace_kernel" or
            "cauchy_kernel".
        components: mixture components (gaussian_mixture).
        smoothness: the local family's k (box^k).
        rpe_scale: the spectrum's initial width in frequency.
        rpe_weight: the RPE's initial weight.
        proposal: the frequencies' proposal: "gaussian" or "cauchy".
        proposal_sigma: the proposal's scale.
        learn_proposal: the proposal's scale is a parameter.
        kind: the query/key feature map, as PerformerAttention's.
        seed: the features' draw.
        eps: the floor of the normaliser.
    """
    _variant = "flt"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, features: int = 64,
                 rpe_features: int = 32, position_dim: int = 1, family: str = "gaussian_mixture",
                 components: int = 2, smoothness: int = 1, rpe_scale: float = 0.1,
                 rpe_weight: float = 1.0, proposal: str = "gaussian",
                 proposal_sigma: float = 1.0, learn_proposal: bool = False,
                 kind: str = "positive", seed: int = 0, eps: float = 1e-30, device=None,
                 dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, features=features,
                        rpe_features=rpe_features, position_dim=position_dim, family=family,
                        components=components, smoothness=smoothness, rpe_scale=rpe_scale,
                        rpe_weight=rpe_weight, proposal=proposal, proposal_sigma=proposal_sigma,
                        learn_proposal=learn_proposal, kind=kind, seed=seed, eps=eps),
                   device, dtype)

    def rpe_function(self, delta: torch.Tensor) -> torch.Tensor:
        """The learned RPE f at offsets, per head. delta: (N, l) -> (H, N)"""
        return self._call("rpe_function", delta)

    def exact_mask(self, positions: torch.Tensor) -> torch.Tensor:
        """N = f(r_i - r_j). positions: (L, l) or (B, L, l) -> (B, H, L, L)"""
        return self._call("exact_mask", positions)


class SchoenbAttention(_RandomFeatures, _Attention):
    """SchoenbAt (Guo et al. 2025): random Maclaurin features of a dot-product kernel. Needs heads
    and head_dim when used alone.

    Args:
        kernel: "exp", "inv", "logi", "trigh" or "sqrt".
        features: random features.
        max_degree: the largest degree of the Maclaurin series drawn.
        ppsbn: the pre- and post-normalisation (ppSBN).
        sbn_eps: the normalisation's epsilon.
        normaliser_floor: the floor of the normaliser.
        gamma, beta: the post-normalisation's initial scale and shift.
        seed: the features' draw.
    """
    _variant = "schoenbat"

    def __init__(self, heads: int = 0, head_dim: int = 0, *, kernel: str = "exp",
                 features: int = 64, max_degree: int = 8, ppsbn: bool = True,
                 sbn_eps: float = 1e-5, normaliser_floor: float = 0.5, gamma: float = 1.0,
                 beta: float = 1.0, seed: int = 0, device=None, dtype=None):
        self._make(dict(heads=heads, head_dim=head_dim, kernel=kernel, features=features,
                        max_degree=max_degree, ppsbn=ppsbn, sbn_eps=sbn_eps,
                        normaliser_floor=normaliser_floor, gamma=gamma, beta=beta, seed=seed),
                   device, dtype)


class FeatureMap(_RandomFeatures, _LibraryModule):
    """The random-feature map of Performer and FLT (for functional.performer_attention)."""

    def __init__(self, input_dim: int, features: int, kind: str = "positive",
                 orthogonal: bool = True, seed: int = 0, *, device=None, dtype=None):
        args = dict(input_dim=input_dim, features=features, kind=kind, orthogonal=orthogonal,
                    seed=seed)
        super().__init__(_C.feature_map(**args), dict(args, device=device, dtype=dtype))
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Query features (per-token shift). x: (..., L, input_dim) -> (..., L, M)"""
        return self._call("query_features", x)

    def key_features(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        return self._call("key_features", x, causal)


_VARIANTS = {}  # attention name -> its module class (filled below)


def _causal_mask(mask, lq, lk) -> bool:
    """Whether attn_mask is the causal mask (bool True above the diagonal, or a float mask that is
    -inf there and 0 elsewhere), the only mask the library's variants apply."""
    if mask.dim() != 2 or mask.shape != (lq, lk):
        return False
    above = torch.triu(torch.ones(lq, lk, dtype=torch.bool, device=mask.device), 1)
    if mask.dtype == torch.bool:
        return bool(torch.equal(mask, above))
    return bool(torch.all(torch.isneginf(mask) == above)) and bool(torch.all(mask[~above] == 0))


class MultiheadAttention(nn.Module):
    """A drop-in for ``torch.nn.MultiheadAttention`` whose heads use any of the library's variants:
    ``MultiheadAttention(embed_dim, num_heads, bias=True, batch_first=False, *, attention="softmax",
    **options of the variant)``; ``forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False, *,
    positions=None) -> (output, weights or None)``, shapes as torch's ((L, N, E), or (N, L, E) with
    batch_first). The projections are ``nn.Linear``s (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``) around the variant's module (``attention``, with heads and head_dim set).

    The variants apply one mask, the causal one: ``is_causal=True``, or an ``attn_mask`` that is
    the causal mask; other masks, dropout, ``add_bias_kv``, ``add_zero_attn`` and other kdim/vdim
    raise. ``need_weights=True`` (torch's default) materialises the L x S matrix, quadratic even
    for the linear variants: pass ``need_weights=False`` for long sequences. ``positions`` are the
    tokens' positions for variants with relative positional encodings ((L, l) or (N, L, l)).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: Optional[int] = None, vdim: Optional[int] = None,
                 batch_first: bool = False, device=None, dtype=None, *,
                 attention: str = "softmax", **options):
        super().__init__()
        name = type(self).__name__
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads != 0:
            raise ValueError(f"{name}: embed_dim ({embed_dim}) must be a positive multiple of "
                             f"num_heads ({num_heads})")
        unsupported = {"dropout": dropout != 0.0, "add_bias_kv": add_bias_kv,
                       "add_zero_attn": add_zero_attn,
                       "kdim": kdim not in (None, embed_dim), "vdim": vdim not in (None, embed_dim)}
        for option, given in unsupported.items():
            if given:
                raise ValueError(f"{name}: {option}={locals()[option]!r} is not supported (the "
                                 f"library's multi-head attention has none)")
        if attention not in _VARIANTS:
            raise ValueError(f"{name}: unknown attention {attention!r}, expected one of "
                             f"{sorted(_VARIANTS)}")
        head_dim = embed_dim // num_heads
        for option, value in (("heads", num_heads), ("head_dim", head_dim)):
            if options.get(option, value) != value:
                raise ValueError(f"{name}: {option}={options[option]} contradicts embed_dim "
                                 f"{embed_dim} with num_heads {num_heads} ({option} {value})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.batch_first = batch_first
        factory = dict(device=device, dtype=dtype)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.attention = _VARIANTS[attention](**dict(options, heads=num_heads, head_dim=head_dim),
                                              **factory)

    def _heads(self, x, batch):  # (N, L, E) -> (N, H, L, D)
        return x.view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: Optional[torch.Tensor] = None, need_weights: bool = True,
                attn_mask: Optional[torch.Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False, *, positions: Optional[torch.Tensor] = None):
        name = type(self).__name__
        for label, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor) or t.dim() not in (2, 3) or \
                    t.shape[-1] != self.embed_dim:
                shape = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name}: {label} must be (L, N, E), (N, L, E) with batch_first "
                                 f"or (L, E), with E = {self.embed_dim}; got {shape}")
        if key_padding_mask is not None:
            raise ValueError(f"{name}: key_padding_mask is not supported (the library's variants "
                             f"apply no padding mask)")
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        if not self.batch_first or unbatched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        batch, lq, lk = query.shape[0], query.shape[1], key.shape[1]
        if key.shape[:2] != value.shape[:2] or key.shape[0] != batch:
            raise ValueError(f"{name}: key and value must have the same batch and length as "
                             f"each other and the batch of query; got query "
                             f"{list(query.shape)}, key {list(key.shape)}, value "
                             f"{list(value.shape)} (batch first)")
        causal = bool(is_causal)
        if attn_mask is not None:
            if not _causal_mask(attn_mask, lq, lk):
                raise ValueError(f"{name}: attn_mask must be the causal mask (the one mask the "
                                 f"library's variants apply; or pass is_causal=True), got a "
                                 f"{attn_mask.dtype} mask of shape {list(attn_mask.shape)}")
            causal = True
        q = self._heads(self.q_proj(query), batch)
        k = self._heads(self.k_proj(key), batch)
        v = self._heads(self.v_proj(value), batch)
        out = self.attention(q, k, v, causal, positions)  # (N, H, L, D)
        out = self.out_proj(out.transpose(1, 2).reshape(batch, lq, self.embed_dim))
        if not self.batch_first or unbatched:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(1)
        weights = None
        if need_weights:
            weights = self.attention.materialize(q, k, causal, positions)  # (N, H, L, S)
            if average_attn_weights:
                weights = weights.mean(1)
            if unbatched:
                weights = weights.squeeze(0)
        return out, weights


class TransformerLM(_LibraryModule):
    """Causal pre-LN transformer language model: TransformerLM(vocab_size, embed_dim, heads,
    layers, max_length=0, ff_dim=0, attention="softmax", tie_weights=True, share_rpe=False, *,
    device=None, dtype=None, **options of the variant: the keywords its class takes, e.g.
    FLTAttention's features=64). forward(tokens (B, L) int64) -> logits (B, L, vocab_size)."""

    def __init__(self, vocab_size: int, embed_dim: int, heads: int, layers: int,
                 max_length: int = 0, ff_dim: int = 0, attention: str = "softmax",
                 tie_weights: bool = True, share_rpe: bool = False, *, device=None, dtype=None,
                 **options):
        args = dict(vocab_size=vocab_size, embed_dim=embed_dim, heads=heads, layers=layers,
                    max_length=max_length, ff_dim=ff_dim, attention=attention,
                    tie_weights=tie_weights, share_rpe=share_rpe, device=device, dtype=dtype,
                    **options)
        super().__init__(_C.transformer_lm(vocab_size, embed_dim, heads, layers, max_length,
                                           ff_dim, tie_weights, share_rpe, attention, options),
                         args)
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._call("lm_forward", tokens)

    def attention_maps(self, tokens: torch.Tensor):
        """Per layer (B, H, L, L), causal."""
        return list(self._call("lm_attention_maps", tokens))


_VARIANTS.update(softmax=SoftmaxAttention, linear=LinearAttention, performer=PerformerAttention,
                 fourier=FourierAttention, flt=FLTAttention, schoenbat=SchoenbAttention)
