"""The library's functional attention forms, under its names, arguments and defaults.

Shapes: q, k (B, H, L, D); v (B, H, L, Dv); float32 or float64; autograd through every input.
"""

from .. import _C

_f = _C.functional

softmax_attention = _f.softmax_attention
softmax_attention_weights = _f.softmax_attention_weights
linear_attention = _f.linear_attention
elu_feature_map = _f.elu_feature_map
fourier_attention = _f.fourier_attention
fourier_attention_weights = _f.fourier_attention_weights
kernelized_attention = _f.kernelized_attention
schoenberg_kernel = _f.schoenberg_kernel
ppsbn_pre = _f.ppsbn_pre


def performer_attention(q, k, v, feature_map, causal=False, eps=None):
    """Performer attention with a fltlab.nn.FeatureMap whose input_dim is D (eps: the library's
    default floor when None)."""
    extra = {} if eps is None else {"eps": eps}

    def performer_attention(q, k, v):
        return _f.performer_attention(q, k, v, feature_map._cpp, causal=causal, **extra)

    return feature_map._call(performer_attention, q, k, v)


__all__ = ["softmax_attention", "softmax_attention_weights", "linear_attention",
           "elu_feature_map", "fourier_attention", "fourier_attention_weights",
           "kernelized_attention", "schoenberg_kernel", "ppsbn_pre", "performer_attention"]
