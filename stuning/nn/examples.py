"""Example models built in code (random weights, nothing downloaded), for tests, the CLI and benchmarks.

``bert_encoder()`` is a BERT-base-sized stack of post-norm encoder layers (hidden 768, 12 heads, FFN
3072) whose every projection is an ``nn.Linear``; ``llama_mlp()`` is Llama-7B's gated MLP block
(4096 -> 11008 -> 4096, SiLU). Both take hidden states of shape (batch, seq, hidden): the embedding
and output layers, which are not matrix products of a weight, are left out. ``tiny_encoder`` and
``tiny_mlp`` are the same architectures at interpreter-friendly sizes, callable without arguments
(``stuning pretune --model stuning.nn.examples:tiny_mlp``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of the {heads} heads")
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape

        def split(t):
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)

        ctx = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)), split(self.value(x)))
        return self.output(ctx.transpose(1, 2).reshape(b, s, h))


class EncoderLayer(nn.Module):
    """BERT's layer: attention and a GELU feed-forward block, each followed by add & LayerNorm."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class Encoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.hidden = hidden
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class GatedMLP(nn.Module):
    """Llama's MLP: ``down(silu(gate(x)) * up(x))``, no biases."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MLPStack(nn.Module):
    def __init__(self, layers: int, hidden: int, intermediate: int):
        super().__init__()
        self.hidden = hidden
        self.layers = nn.ModuleList(GatedMLP(hidden, intermediate) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x)
        return x


def _built(make, seed: int, dtype, device) -> nn.Module:
    # nn.Linear initializes from the global generator: fork it so a seed gives the same weights
    # without disturbing the caller's random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = make()
    return model.to(device=device, dtype=dtype).eval()


def bert_encoder(layers: int = 12, hidden: int = 768, heads: int = 12, ffn: int = 3072, *, seed: int = 0,
                 dtype: torch.dtype | None = None, device=None) -> Encoder:
    """A BERT-base-sized encoder (12 layers of 4 attention projections and a 768 -> 3072 -> 768 FFN)."""
    return _built(lambda: Encoder(layers, hidden, heads, ffn), seed, dtype, device)


def llama_mlp(hidden: int = 4096, intermediate: int = 11008, layers: int = 1, *, seed: int = 0,
              dtype: torch.dtype | None = None, device=None) -> MLPStack:
    """Llama-7B's MLP block (gate and up 4096 -> 11008, down 11008 -> 4096), ``layers`` of them with residuals."""
    return _built(lambda: MLPStack(layers, hidden, intermediate), seed, dtype, device)


def tiny_encoder() -> Encoder:
    """One encoder layer, hidden 32, 2 heads, FFN 64: seconds in Triton's interpreter."""
    return bert_encoder(layers=1, hidden=32, heads=2, ffn=64)


def tiny_mlp() -> MLPStack:
    """One gated MLP, 32 -> 64 -> 32."""
    return llama_mlp(hidden=32, intermediate=64)


MODELS = {"bert": bert_encoder, "llama-mlp": llama_mlp}
