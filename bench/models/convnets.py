"""Convolutional zoo models in plain torch (torchvision is not importable beside the pinned torch):
ResNet-18, MobileNetV2, MobileNetV3-small, a U-Net with ConvTranspose and Resize, a TextCNN."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

SIZES = {"small": 32, "full": 224}  # image side


def _image(size: str, channels: int = 3) -> tuple[torch.Tensor]:
    torch.manual_seed(0)
    return (torch.randn(1, channels, SIZES[size], SIZES[size]),)


def _seeded(cls: type, *args) -> nn.Module:
    """The same weights on every build."""
    torch.manual_seed(1)
    return _ready(cls(*args))


def _ready(module: nn.Module) -> nn.Module:
    """BatchNorm statistics that are not the identity, eval mode."""
    torch.manual_seed(2)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return module.eval()


def conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: type | None = nn.ReLU) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, 1, act=None))
        self.skip = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet18(size: str):
    return _seeded(ResNet18), _image(size)


class InvertedResidual(nn.Module):
    """MobileNetV2's block (V3's with squeeze-excite and hard-swish when `se`/`act` say so)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, k: int = 3, se: bool = False,
                 act: type = nn.ReLU6):
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act=act)] if expand != 1 else []
        layers.append(conv_bn(hidden, hidden, k, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden))
        layers.append(conv_bn(hidden, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, max(8, channels // 4), 1)
        self.expand = nn.Conv2d(max(8, channels // 4), channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers, cin = [conv_bn(3, 32, 3, 2, act=nn.ReLU6)], 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def mobilenet_v2(size: str):
    return _seeded(MobileNetV2), _image(size)


class MobileNetV3Small(nn.Module):
    # kernel, expansion, out, squeeze-excite, hard-swish, stride
    SETTINGS = ((3, 1, 16, True, False, 2), (3, 4.5, 24, False, False, 2), (3, 88 / 24, 24, False, False, 1),
                (5, 4, 40, True, True, 2), (5, 6, 40, True, True, 1), (5, 6, 40, True, True, 1),
                (5, 3, 48, True, True, 1), (5, 3, 48, True, True, 1), (5, 6, 96, True, True, 2),
                (5, 6, 96, True, True, 1), (5, 6, 96, True, True, 1))

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers, cin = [conv_bn(3, 16, 3, 2, act=nn.Hardswish)], 16
        for k, e, c, se, hs, s in self.SETTINGS:
            block = InvertedResidual(cin, c, s, 1, k, se, nn.Hardswish if hs else nn.ReLU)
            if e != 1:  # fractional expansions: rebuild with the exact hidden width
                block = _expanded_block(cin, c, s, round(cin * e), k, se, nn.Hardswish if hs else nn.ReLU)
            layers.append(block)
            cin = c
        layers.append(conv_bn(cin, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, classes))

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def _expanded_block(cin, cout, stride, hidden, k, se, act) -> InvertedResidual:
    block = InvertedResidual(cin, cout, stride, 1, k, se, act)
    layers = [conv_bn(cin, hidden, 1, act=act), conv_bn(hidden, hidden, k, stride, groups=hidden, act=act)]
    if se:
        layers.append(SqueezeExcite(hidden))
    layers.append(conv_bn(hidden, cout, 1, act=None))
    block.body = nn.Sequential(*layers)
    return block


def mobilenet_v3_small(size: str):
    return _seeded(MobileNetV3Small), _image(size)


class UNet(nn.Module):
    """Two levels down, two up: one upsampling by ConvTranspose, one by Resize (bilinear)."""

    def __init__(self, width: int = 16):
        super().__init__()
        w = width
        self.down1 = nn.Sequential(conv_bn(3, w), conv_bn(w, w))
        self.down2 = nn.Sequential(conv_bn(w, 2 * w), conv_bn(2 * w, 2 * w))
        self.bottom = nn.Sequential(conv_bn(2 * w, 4 * w), conv_bn(4 * w, 4 * w))
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = nn.Sequential(conv_bn(4 * w, 2 * w), conv_bn(2 * w, 2 * w))
        self.reduce1 = nn.Conv2d(2 * w, w, 1)
        self.dec1 = nn.Sequential(conv_bn(2 * w, w), conv_bn(w, w))
        self.out = nn.Conv2d(w, 2, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], 1))
        u1 = F.interpolate(self.reduce1(u2), scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(self.dec1(torch.cat([u1, d1], 1)))


def unet(size: str):
    return _seeded(UNet), _image(size)


class TextCNN(nn.Module):
    """Kim (2014): an embedding, 1-D convolutions of widths 3/4/5, max over time, a classifier."""

    def __init__(self, vocab: int = 5000, dim: int = 128, filters: int = 100, classes: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList(nn.Conv1d(dim, filters, k) for k in (3, 4, 5))
        self.fc = nn.Linear(3 * filters, classes)

    def forward(self, tokens):
        x = self.embed(tokens).transpose(1, 2)
        pooled = [F.relu(conv(x)).amax(dim=2) for conv in self.convs]
        return self.fc(torch.cat(pooled, 1))


def textcnn(size: str):
    torch.manual_seed(0)
    length = 16 if size == "small" else 256
    return _seeded(TextCNN), (torch.randint(0, 5000, (1, length)),)
