"""Every attention variant of the library as a torch.nn.Module, MultiheadAttention and
TransformerLM, and the functional forms (fltlab.nn.functional)."""

from . import functional
from .modules import (FeatureMap, FLTAttention, FourierAttention, LinearAttention,
                      MultiheadAttention, PerformerAttention, SchoenbAttention, SoftmaxAttention,
                      TransformerLM)

__all__ = ["functional", "FeatureMap", "FLTAttention", "FourierAttention", "LinearAttention",
           "MultiheadAttention", "PerformerAttention", "SchoenbAttention", "SoftmaxAttention",
           "TransformerLM"]
