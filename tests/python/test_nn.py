"""fltlab.nn: every attention variant against plain PyTorch references written here (the exact ones
to rounding, the random-feature ones within their estimators' error), parameters PyTorch sees,
gradients by torch.autograd.gradcheck in double, and the library's errors."""

import copy
import inspect
import io
import math

import pytest
import torch
from torch import nn
from torch.nn.utils.stateless import functional_call

import fltlab
from fltlab import nn as fnn
from fltlab.nn import functional as FF


# ---- plain PyTorch references ---------------------------------------------------------------------

def causal_mask(lq, lk):
    return torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1)


def softmax_reference(q, k, v, causal=False, bias=None, scale=None):
    scores = q @ k.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if bias is not None:
        scores = scores + bias
    if causal:
        scores = scores.masked_fill(causal_mask(q.shape[-2], k.shape[-2]), float("-inf"))
    return torch.softmax(scores, -1) @ v


def weighted_reference(weights, v, causal):
    """out_i = sum_j w_ij v_j / sum_j w_ij over the visible keys."""
    if causal:
        weights = weights.masked_fill(causal_mask(*weights.shape[-2:]), 0.0)
    return (weights @ v) / weights.sum(-1, keepdim=True)


def linear_reference(q, k, v, causal=False):
    phi_q, phi_k = nn.functional.elu(q) + 1, nn.functional.elu(k) + 1
    return weighted_reference(phi_q @ phi_k.transpose(-1, -2), v, causal)


def fourier_reference(q, k, v, r, power=4, causal=False):
    """FourierFormer: K_ij = prod_d (sin(R (q_id - k_jd)) / (R (q_id - k_jd)))^p."""
    x = r * (q.unsqueeze(-2) - k.unsqueeze(-3))  # (B, H, Lq, Lk, D)
    sinc = torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x)
    return weighted_reference((sinc ** power).prod(-1), v, causal)


def gaussian_mixture_rpe(module, delta):
    """The FLT paper's f of a Gaussian-mixture spectrum from the module's parameters:
    f(x) = sum_t w_t (2 pi s_t^2)^(1/2) exp(-2 pi^2 s_t^2 x^2) cos(2 pi mu_t x). -> (H, N)"""
    w = module.rpe.weights.detach().double()[..., None]
    s = module.rpe.log_scale.detach().double().exp()[..., None]
    mu = module.rpe.means.detach().double()[..., 0, None]
    d = delta.double()
    return (w * (2 * math.pi * s ** 2).sqrt() * torch.exp(-2 * math.pi ** 2 * s ** 2 * d ** 2)
            * torch.cos(2 * math.pi * mu * d)).sum(1)


def ppsbn_reference(x, eps=1e-5):
    """SchoenbAt's pre-normalisation (non-causal): standardise each feature over batch and length,
    unit rows, times D^(-1/4)."""
    mean = x.mean(dim=(0, 2), keepdim=True)
    var = x.var(dim=(0, 2), unbiased=False, keepdim=True)
    z = (x - mean) / (var + eps).sqrt()
    return z / z.norm(dim=-1, keepdim=True) * x.shape[-1] ** -0.25


def qkv(b=2, h=2, lq=12, lk=12, d=8, dtype=torch.float64, scale=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, lq, d, generator=g, dtype=dtype) * scale,
            torch.randn(b, h, lk, d, generator=g, dtype=dtype) * scale,
            torch.randn(b, h, lk, d, generator=g, dtype=dtype))


# ---- exact variants ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-13)])
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_matches_the_reference(dtype, tol, causal):
    q, k, v = qkv(dtype=dtype)
    expected = softmax_reference(q, k, v, causal)
    assert FF.softmax_attention(q, k, v, causal=causal).dtype == dtype
    assert (FF.softmax_attention(q, k, v, causal=causal) - expected).abs().max() < tol
    assert (fnn.SoftmaxAttention()(q, k, v, causal=causal) - expected).abs().max() < tol
    scaled = FF.softmax_attention(q, k, v, causal, 0.3)
    assert (scaled - softmax_reference(q, k, v, causal, scale=0.3)).abs().max() < tol
    weights = FF.softmax_attention_weights(q, k, causal=causal)
    assert (weights @ v - expected).abs().max() < tol


def test_non_causal_queries_and_keys_of_other_lengths():
    q, k, v = qkv(lq=5, lk=9)
    assert (FF.softmax_attention(q, k, v) - softmax_reference(q, k, v)).abs().max() < 1e-13


@pytest.mark.parametrize("causal", [False, True])
def test_linear_and_fourier_match_their_references(causal):
    q, k, v = qkv()
    assert (FF.linear_attention(q, k, v, causal=causal)
            - linear_reference(q, k, v, causal)).abs().max() < 1e-12
    assert (fnn.LinearAttention()(q, k, v, causal) - linear_reference(q, k, v, causal)).abs().max() < 1e-12
    r = torch.tensor([1.7], dtype=torch.float64)
    expected = fourier_reference(q, k, v, r, 4, causal)
    assert (FF.fourier_attention(q, k, v, r, causal=causal) - expected).abs().max() < 1e-12
    module = fnn.FourierAttention(r_init=1.7).double()  # R: 1.7 rounded to float32, then double
    assert (module(q, k, v, causal) - fourier_reference(q, k, v, module.R.detach(), 4, causal)
            ).abs().max() < 1e-12
    q32, k32, v32 = (t.float() for t in (q, k, v))
    assert (FF.fourier_attention(q32, k32, v32, r.float(), causal=causal).double()
            - expected).abs().max() < 1e-5


def test_multihead_attention_is_projections_around_the_variant():
    torch.manual_seed(0)
    mha = fnn.MultiheadAttention(16, 4, batch_first=True).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    p = dict(mha.named_parameters())
    assert set(p) == {f"{n}_proj.{w}" for n in ("q", "k", "v", "out") for w in ("weight", "bias")}

    def heads(t):
        return t.view(2, 7, 4, 4).transpose(1, 2)

    q, k, v = (heads(nn.functional.linear(x, p[f"{n}_proj.weight"], p[f"{n}_proj.bias"]))
               for n in "qkv")
    out = softmax_reference(q, k, v, causal=True).transpose(1, 2).reshape(2, 7, 16)
    expected = nn.functional.linear(out, p["out_proj.weight"], p["out_proj.bias"])
    got, weights = mha(x, x, x, is_causal=True, need_weights=False)
    assert weights is None
    assert (got - expected).abs().max() < 1e-12


def torch_twin(mha):
    """torch.nn.MultiheadAttention with the weights of a fltlab one (torch packs q, k, v)."""
    twin = nn.MultiheadAttention(mha.embed_dim, mha.num_heads, batch_first=mha.batch_first)
    twin = twin.to(mha.q_proj.weight.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight,
                                             mha.v_proj.weight]))
        twin.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        twin.out_proj.weight.copy_(mha.out_proj.weight)
        twin.out_proj.bias.copy_(mha.out_proj.bias)
    return twin


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_is_a_drop_in_for_torchs(batch_first):
    # Same weights, same calls: the outputs and the (head-averaged or per-head) weights of
    # torch.nn.MultiheadAttention, in self- and cross-attention, with the causal mask given as
    # torch takes it.
    torch.manual_seed(1)
    mha = fnn.MultiheadAttention(12, 3, batch_first=batch_first).double()
    twin = torch_twin(mha)

    def shaped(n, l):
        t = torch.randn(n, l, 12, dtype=torch.float64)
        return t if batch_first else t.transpose(0, 1)

    query, memory = shaped(2, 5), shaped(2, 9)
    for args, kwargs in [((query, memory, memory), {}),
                         ((query, query, query), dict(attn_mask=causal_mask(5, 5))),
                         ((query, query, query),
                          dict(attn_mask=torch.zeros(5, 5, dtype=torch.float64).masked_fill(
                              causal_mask(5, 5), float("-inf")), average_attn_weights=False))]:
        out, weights = mha(*args, **kwargs)
        out_t, weights_t = twin(*args, **kwargs)
        assert out.shape == out_t.shape and weights.shape == weights_t.shape
        assert (out - out_t).abs().max() < 1e-12
        assert (weights - weights_t).abs().max() < 1e-12
    # Unbatched (L, E) inputs, as torch.
    out, weights = mha(query[:, 0] if not batch_first else query[0],
                       *(2 * [memory[:, 0] if not batch_first else memory[0]]))
    assert out.shape == (5, 12) and weights.shape == (5, 9)


def test_multihead_attention_refuses_what_its_variants_do_not_do():
    with pytest.raises(ValueError, match="dropout=0.1 is not supported"):
        fnn.MultiheadAttention(8, 2, dropout=0.1)
    with pytest.raises(ValueError, match="kdim=4 is not supported"):
        fnn.MultiheadAttention(8, 2, kdim=4)
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be a positive multiple of num_heads \(3\)"):
        fnn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="unknown attention 'lsh'"):
        fnn.MultiheadAttention(8, 2, attention="lsh")
    with pytest.raises(ValueError, match="head_dim=8 contradicts embed_dim 8 with num_heads 2"):
        fnn.MultiheadAttention(8, 2, attention="flt", head_dim=8)
    mha = fnn.MultiheadAttention(8, 2, attention="performer", features=16)
    x = torch.randn(4, 1, 8)
    with pytest.raises(ValueError, match="attn_mask must be the causal mask"):
        mha(x, x, x, attn_mask=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask is not supported"):
        mha(x, x, x, key_padding_mask=torch.zeros(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key must be .* with E = 8; got \[4, 1, 6\]"):
        mha(x, torch.randn(4, 1, 6), x)
    with pytest.raises(TypeError, match="value"):  # the old self-attention call: torch's error
        mha(x, is_causal=True)
    out, _ = mha(x, x, x, is_causal=True, need_weights=False)
    assert out.shape == (4, 1, 8) and torch.isfinite(out).all()


# ---- random-feature variants: unbiased estimators whose error shrinks like 1/sqrt(features) --------

def mean_error(make, reference, features, seeds=3, causal=False):
    q, k, v = qkv()
    errors = [(make(features, seed).double()(q, k, v, causal) - reference(q, k, v, causal))
              .abs().mean().item() for seed in range(seeds)]
    return sum(errors) / seeds


@pytest.mark.parametrize("causal", [False, True])
def test_performer_estimates_softmax(causal):
    def make(m, seed):
        return fnn.PerformerAttention(head_dim=8, features=m, seed=seed)

    few, many = (mean_error(make, softmax_reference, m, causal=causal) for m in (64, 4096))
    # 64x the features: about 8x smaller error for a 1/sqrt(m) estimator (measured 0.035 -> 0.005).
    assert many < few / 3
    assert many < 0.015


def test_flt_estimates_rpe_masked_softmax():
    positions = torch.arange(12, dtype=torch.float64)
    delta = positions[:, None] - positions[None, :]

    def make(m, seed):
        return fnn.FLTAttention(heads=2, head_dim=8, features=m, rpe_features=m, seed=seed,
                                proposal_sigma=0.1)

    def reference_of(module):
        mask = gaussian_mixture_rpe(module, delta.reshape(-1)).reshape(2, 12, 12)
        return lambda q, k, v, causal: softmax_reference(q, k, v, causal, bias=mask)

    module = make(16, 0)
    # The library's f is the paper's (the reference above).
    assert (module.exact_mask(positions[:, None])[0] - gaussian_mixture_rpe(
        module, delta.reshape(-1)).reshape(2, 12, 12)).abs().max() < 1e-6
    q, k, v = qkv()
    errors, unmasked = {}, []
    for m in (64, 1024):
        modules = [make(m, seed).double() for seed in range(3)]
        errors[m] = sum((f(q, k, v) - reference_of(f)(q, k, v, False)).abs().mean().item()
                        for f in modules) / len(modules)
        unmasked += [(softmax_reference(q, k, v) - reference_of(f)(q, k, v, False)).abs().mean()
                     .item() for f in modules]
    # 16x the features: 2.2x smaller error (mean over seeds 0-2: 0.092 -> 0.042; over seeds 0-9:
    # 0.095 -> 0.043, per-seed sd 0.010 and 0.0045), not the 4x of a 1/sqrt(m) estimator: the narrow
    # proposal (sigma 0.1) makes the RPE weights g / p heavy-tailed (error ~ m^-0.28 from m = 64,
    # 256, 1024). A defect that stops the features from mattering gives 1x.
    assert errors[1024] < errors[64] / 2
    # And the estimate beats ignoring the mask (plain softmax: 0.085 from the masked reference),
    # which an FLT that lost its RPE would not (its error would be that plus its own).
    assert errors[1024] < sum(unmasked) / len(unmasked)


def test_schoenbat_estimates_the_kernelized_attention_of_its_normalised_inputs():
    def make(m, seed):
        return fnn.SchoenbAttention(heads=2, head_dim=8, features=m, seed=seed)

    def reference(q, k, v, causal):
        # gamma = beta = 1 at initialisation: the post-normalisation is the identity.
        return weighted_reference(torch.exp(ppsbn_reference(q) @ ppsbn_reference(k).transpose(
            -1, -2)), v, causal)

    q, _, _ = qkv()
    assert (FF.ppsbn_pre(q, False) - ppsbn_reference(q)).abs().max() < 1e-12
    few, many = (mean_error(make, reference, m) for m in (16, 2048))
    assert many < few / 4
    assert many < 0.01


# ---- parameters, autograd, copies ----------------------------------------------------------------

def test_parameters_are_ordinary_parameters_pytorch_trains():
    module = fnn.FLTAttention(heads=2, head_dim=8, features=16, rpe_features=8)
    params = dict(module.named_parameters())
    assert set(params) == {"rpe.weights", "rpe.log_scale", "rpe.means"}
    assert all(type(p) is nn.Parameter for p in params.values())
    assert "feature_map.projection" in module.state_dict()
    q, k, v = qkv(dtype=torch.float32)
    sgd = torch.optim.SGD(module.parameters(), lr=0.5)
    before = module(q, k, v, causal=True).detach()
    module(q, k, v, causal=True).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    sgd.step()
    assert not torch.allclose(module(q, k, v, causal=True), before)  # the library sees the step
    out = module(q, k, v, causal=True)
    out.sum().backward()
    assert out.grad_fn.inner is None  # the library's graph went with the backward, as any graph

    fourier = fnn.FourierAttention(r_init=1.0)
    with torch.no_grad():
        fourier.R.fill_(2.5)  # an in-place edit reaches the library's tensor
    r = torch.tensor([2.5])
    assert torch.allclose(fourier(q, k, v), FF.fourier_attention(q, k, v, r), atol=1e-6)


def test_state_dict_double_deepcopy_and_pickle():
    torch.manual_seed(0)
    module = fnn.PerformerAttention(head_dim=8, features=32, seed=4)
    other = fnn.PerformerAttention(head_dim=8, features=32, seed=5)
    q, k, v = qkv(dtype=torch.float32)
    assert not torch.allclose(module(q, k, v), other(q, k, v))
    other.load_state_dict(module.state_dict())  # random features are buffers: they travel
    assert torch.equal(module(q, k, v), other(q, k, v))

    as_double = copy.deepcopy(module).double()
    assert as_double.feature_map.projection.dtype == torch.float64
    qd, kd, vd = (t.double() for t in (q, k, v))
    assert as_double(qd, kd, vd).dtype == torch.float64
    assert torch.allclose(as_double(qd, kd, vd).float(), module(q, k, v), atol=1e-5)

    lm = fnn.TransformerLM(50, 16, 2, 2, attention="flt", features=8, rpe_features=8)
    buffer = io.BytesIO()
    torch.save(lm, buffer)
    loaded = torch.load(io.BytesIO(buffer.getvalue()))
    tokens = torch.randint(0, 50, (2, 9))
    assert torch.equal(loaded(tokens), lm(tokens))
    with torch.no_grad():
        next(loaded.parameters()).add_(1.0)
    assert not torch.equal(loaded(tokens), lm(tokens))  # a copy, not the same tensors


@pytest.mark.parametrize("make", [
    lambda seed: fnn.PerformerAttention(head_dim=8, features=16, seed=seed),
    lambda seed: fnn.FLTAttention(heads=2, head_dim=8, features=16, rpe_features=8, seed=seed),
    lambda seed: fnn.SchoenbAttention(heads=2, head_dim=8, features=16, seed=seed),
], ids=["performer", "flt", "schoenbat"])
def test_redraw_gives_the_features_of_that_seed_in_the_modules_buffers(make):
    q, k, v = qkv(dtype=torch.float32)
    module, other = make(1), make(2)
    before = {n: b.clone() for n, b in module.named_buffers()}
    module.redraw(2)
    assert any(not torch.equal(b, before[n]) for n, b in module.named_buffers())
    for (n, a), (_, b) in zip(module.named_buffers(), other.named_buffers()):
        assert torch.equal(a, b), n
    assert torch.equal(module(q, k, v), other(q, k, v))


def test_transformer_lm_trains_with_any_pytorch_optimizer():
    torch.manual_seed(0)
    lm = fnn.TransformerLM(vocab_size=20, embed_dim=16, heads=2, layers=1, attention="fourier")
    tokens = torch.randint(0, 20, (4, 10))
    assert lm(tokens).shape == (4, 10, 20)
    opt = torch.optim.Adam(lm.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        logits = lm(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert len(lm.attention_maps(tokens)) == 1


# ---- gradients -----------------------------------------------------------------------------------

def small(seed=0, lq=5, lk=5):
    return tuple(t.requires_grad_() for t in qkv(b=1, h=2, lq=lq, lk=lk, d=4, seed=seed))


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_functional_forms(causal):
    q, k, v = small()
    assert torch.autograd.gradcheck(lambda a, b, c: FF.softmax_attention(a, b, c, causal=causal),
                                    (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: FF.linear_attention(a, b, c, causal=causal),
                                    (q, k, v))
    r = torch.tensor([1.3], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b, c, rr: FF.fourier_attention(a, b, c, rr, causal=causal), (q, k, v, r))


@pytest.mark.parametrize("make", [
    lambda: fnn.PerformerAttention(head_dim=4, features=16),
    lambda: fnn.FLTAttention(heads=2, head_dim=4, features=16, rpe_features=8),
    lambda: fnn.SchoenbAttention(heads=2, head_dim=4, features=16),
], ids=["performer", "flt", "schoenbat"])
def test_gradcheck_random_feature_modules(make):
    module = make().double()
    q, k, v = small()
    assert torch.autograd.gradcheck(lambda a, b, c: module(a, b, c, causal=True), (q, k, v))


def test_gradcheck_multihead_flt():
    mha = fnn.MultiheadAttention(8, 2, batch_first=True, attention="flt", features=8,
                                 rpe_features=8).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: mha(t, t, t, is_causal=True)[0], (x,))


def test_gradcheck_reaches_the_parameters_through_the_library():
    # The library computes with its own tensors; the gradients it finds for them are the Python
    # parameters' (finite differences in the parameters themselves, put in place by PyTorch's
    # functional_call, as torch.func users do).
    module = fnn.FLTAttention(heads=2, head_dim=4, features=16, rpe_features=8).double()
    q, k, v = small()
    names = ("rpe.weights", "rpe.log_scale")

    def f(*values):
        return functional_call(module, dict(zip(names, values)), (q, k, v, True))

    params = dict(module.named_parameters())
    values = tuple(params[n].detach().clone().requires_grad_() for n in names)
    assert torch.autograd.gradcheck(f, values)
    # A replaced parameter is what the library reads at the next call.
    before = module(q, k, v).detach()
    module.rpe.weights = nn.Parameter(module.rpe.weights.detach() * 2)
    assert not torch.allclose(module(q, k, v), before)


# ---- errors --------------------------------------------------------------------------------------

def test_bad_input_raises_runtime_error_naming_the_value():
    q, k, v = qkv()
    with pytest.raises(RuntimeError, match=r"q.*\[2, 12, 8\]"):
        FF.softmax_attention(q[0], k, v)
    with pytest.raises(RuntimeError, match="causal"):
        FF.softmax_attention(q[:, :, :5], k, v, causal=True)
    with pytest.raises(RuntimeError, match=r"features.*must be positive, got -3"):
        fnn.PerformerAttention(head_dim=8, features=-3)
    with pytest.raises(RuntimeError, match="gaussian_mixtur"):
        fnn.FLTAttention(heads=2, head_dim=8, family="gaussian_mixtur")
    # An unknown keyword is a TypeError: Python's for a variant, whose signature lists its options;
    # the library's, listing the valid ones, for the variant options TransformerLM passes on.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'rpe_featurs'"):
        fnn.FLTAttention(heads=2, head_dim=8, rpe_featurs=8)
    with pytest.raises(TypeError, match=r"unknown option\(s\) rpe_featurs \(the options: .*rpe_features"):
        fnn.TransformerLM(10, 8, 2, 1, attention="flt", rpe_featurs=8)
    with pytest.raises(RuntimeError, match=r"features must be an integer, got '8'"):
        fnn.FLTAttention(heads=2, head_dim=8, features="8")
    with pytest.raises(RuntimeError, match="lsh"):
        fnn.TransformerLM(10, 8, 2, 1, attention="lsh")
    with pytest.raises(RuntimeError, match="head_dim 8.*\\b4\\b|4.*head_dim"):
        fnn.FLTAttention(heads=2, head_dim=8)(*small())
    # No C++ backtrace in the message: the library's words only.
    with pytest.raises(RuntimeError) as error:
        fnn.PerformerAttention(head_dim=8, features=0)
    assert "frame #" not in str(error.value)


VARIANT_CLASSES = {"softmax": fnn.SoftmaxAttention, "linear": fnn.LinearAttention,
                   "performer": fnn.PerformerAttention, "fourier": fnn.FourierAttention,
                   "flt": fnn.FLTAttention, "schoenbat": fnn.SchoenbAttention}


@pytest.mark.parametrize("variant", sorted(VARIANT_CLASSES))
def test_variant_signature_spells_out_the_library_defaults(variant):
    # help() and an editor show each option, its type and its default: the library's.
    parameters = dict(inspect.signature(VARIANT_CLASSES[variant]).parameters)
    assert parameters.pop("device").default is None and parameters.pop("dtype").default is None
    defaults = fltlab._C.attention_defaults(variant)
    assert sorted(parameters) == sorted(defaults)
    for name, parameter in parameters.items():
        assert parameter.default == defaults[name], name
        assert type(parameter.default) is type(defaults[name]), name
        assert parameter.annotation is type(defaults[name]), name
        assert parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    assert list(parameters)[:2] == ["heads", "head_dim"]


@pytest.mark.parametrize("variant", sorted(VARIANT_CLASSES))
def test_variant_takes_device_and_dtype_as_torch_modules_do(variant):
    module = VARIANT_CLASSES[variant](heads=2, head_dim=8, device="cpu", dtype=torch.float64)
    tensors = list(module.parameters()) + list(module.buffers())
    assert all(t.dtype == torch.float64 for t in tensors if t.is_floating_point())
    q, k, v = qkv(h=2, d=8)
    assert module(q, k, v).dtype == torch.float64
    # A copy is made with the same arguments, dtype included.
    copied = copy.deepcopy(module)
    assert all(t.dtype == torch.float64 for t in copied.parameters())


def test_containers_pass_device_and_dtype_to_their_variant():
    mha = fnn.MultiheadAttention(16, 2, attention="flt", features=8, dtype=torch.float64)
    assert {p.dtype for p in mha.parameters()} == {torch.float64}
    lm = fnn.TransformerLM(10, 8, 2, 1, attention="performer", features=8, dtype=torch.float64)
    assert {p.dtype for p in lm.parameters()} == {torch.float64}
    assert lm(torch.randint(0, 10, (1, 5))).dtype == torch.float64


def test_repr_names_the_parts_tensors_not_private_classes():
    text = repr(fnn.FLTAttention(heads=2, head_dim=8))
    assert "_Holder" not in text
    assert "Tensors(" in text and "weights: [" in text, text
