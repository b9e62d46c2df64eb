"""Transformer zoo models: MLP-Mixer, a ViT with fused qkv, torch.nn.TransformerEncoderLayer
(plain torch), and BERT and GPT-2 built from `transformers` configs (random weights)."""

from __future__ import annotations

import torch
from torch import nn

SEQ = {"small": 16, "full": 128}
IMAGE = {"small": 32, "full": 224}


def _ready(module: nn.Module) -> nn.Module:
    return module.eval()


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tokens * 2), nn.GELU(), nn.Linear(tokens * 2, tokens))
        self.channel_mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MlpMixer(nn.Module):
    def __init__(self, image: int, patch: int = 16, dim: int = 256, depth: int = 4, classes: int = 1000):
        super().__init__()
        tokens = (image // patch) ** 2
        self.patches = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*(MixerBlock(tokens, dim) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patches(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


def _image(size: str) -> tuple[torch.Tensor]:
    torch.manual_seed(0)
    return (torch.randn(1, 3, IMAGE[size], IMAGE[size]),)


def mlp_mixer(size: str):
    torch.manual_seed(1)
    return _ready(MlpMixer(IMAGE[size], patch=8 if size == "small" else 16)), _image(size)


class FusedQkvAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj(y)


class VitBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = FusedQkvAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Vit(nn.Module):
    def __init__(self, image: int, patch: int, dim: int = 192, depth: int = 4, heads: int = 3, classes: int = 1000):
        super().__init__()
        self.patches = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*(VitBlock(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patches(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def vit(size: str):
    torch.manual_seed(1)
    return _ready(Vit(IMAGE[size], patch=8 if size == "small" else 16)), _image(size)


class EncoderStack(nn.Module):
    """torch.nn.TransformerEncoderLayer as users stack it (batch first, GELU, pre-norm)."""

    def __init__(self, dim: int = 256, heads: int = 4, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def encoder_layer(size: str):
    torch.manual_seed(1)
    module = _ready(EncoderStack())
    torch.manual_seed(0)
    return module, (torch.randn(1, SEQ[size], 256),)


def bert(size: str):
    from transformers import BertConfig, BertModel

    torch.manual_seed(1)
    config = BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024,
                        vocab_size=4096, max_position_embeddings=512, attn_implementation="eager")
    model = _ready(BertModel(config, add_pooling_layer=False))
    torch.manual_seed(0)
    seq = SEQ[size]
    ids = torch.randint(0, 4096, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, seq - seq // 4:] = 0  # padding at the end: the mask matters
    return _Unwrap(model).eval(), (ids, mask)


def gpt2(size: str):
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(1)
    config = GPT2Config(n_embd=256, n_layer=2, n_head=4, vocab_size=4096, n_positions=512, use_cache=False,
                        attn_implementation="eager")
    model = _ready(GPT2Model(config))
    torch.manual_seed(0)
    return _Unwrap(model).eval(), (torch.randint(0, 4096, (1, SEQ[size])),)


class _Unwrap(nn.Module):
    """The last hidden state as a plain tensor (exporters do not take ModelOutput dicts well)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args, return_dict=False)[0]
