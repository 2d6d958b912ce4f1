"""Example CNNs built in code (random weights, nothing downloaded), for tests, the CLI and benchmarks.

``resnet50()`` has ResNet-50's layers (v1.5, as torchvision: stride on the bottleneck's 3x3; 53
convolutions, 16 bottlenecks, a 2048 -> 1000 classifier); ``mobilenet_v1()`` has MobileNetV1's (a
3x3 stem, 13 depthwise-separable blocks whose depthwise 3x3 stays dense under ``sparsify`` and whose
pointwise 1x1 is a plain SpMM, a 1024 -> 1000 classifier). Both take images (B, 3, H, W) and keep
BatchNorm as separate layers, dense either way. ``tiny_resnet`` and ``tiny_mobilenet`` are the same
architectures at interpreter-friendly sizes, callable without arguments (take 3 x 32 x 32 inputs).

The weights are drawn so the activations keep their scale through the depth, as a trained network's
do, so outputs in fp16 neither overflow nor vanish: He-normal convolutions (fan in) and the last
BatchNorm of each residual branch scaled by 0.5, so the residual sum grows slowly.
"""

from __future__ import annotations

import torch
from torch import nn

from stuning.nn.examples import _built

RESIDUAL_GAIN = 0.5


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        cout = planes * self.expansion
        self.branch = nn.Sequential(*_conv_bn(cin, planes, 1), nn.ReLU(inplace=True),
                                    *_conv_bn(planes, planes, 3, stride), nn.ReLU(inplace=True),
                                    *_conv_bn(planes, cout, 1))
        self.downsample = nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.branch(x) + identity)


class ResNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...], width: int, classes: int):
        super().__init__()
        self.in_channels = 3
        self.stem = nn.Sequential(*_conv_bn(3, width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, count in enumerate(blocks):
            planes = width * 2**i
            stage = []
            for j in range(count):
                stage.append(Bottleneck(cin, planes, 2 if i > 0 and j == 0 else 1))
                cin = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*stage))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)
        _init(self)
        for block in self.modules():
            if isinstance(block, Bottleneck):
                nn.init.constant_(block.branch[-1].weight, RESIDUAL_GAIN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))


# MobileNetV1's pointwise widths after the 32-channel stem; a pair is (channels, stride 2).
MOBILENET_V1 = (64, (128, 2), 128, (256, 2), 256, (512, 2), 512, 512, 512, 512, 512, (1024, 2), 1024)


class MobileNetV1(nn.Module):
    def __init__(self, width: float, classes: int, blocks: tuple = MOBILENET_V1):
        super().__init__()
        self.in_channels = 3

        def scaled(c: int) -> int:
            return max(8, int(c * width))

        cin = scaled(32)
        layers = [*_conv_bn(3, cin, 3, 2), nn.ReLU(inplace=True)]
        for spec in blocks:
            cout, stride = spec if isinstance(spec, tuple) else (spec, 1)
            cout = scaled(cout)
            layers += [*_conv_bn(cin, cin, 3, stride, groups=cin), nn.ReLU(inplace=True),  # depthwise
                       *_conv_bn(cin, cout, 1), nn.ReLU(inplace=True)]  # pointwise
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)
        _init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.features(x)).flatten(1))


def _init(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def resnet50(classes: int = 1000, *, blocks: tuple[int, ...] = (3, 4, 6, 3), width: int = 64, seed: int = 0,
             dtype: torch.dtype | None = None, device=None) -> ResNet:
    """ResNet-50's layers (``blocks`` bottlenecks per stage, ``width`` stem channels), in eval mode."""
    return _built(lambda: ResNet(tuple(blocks), width, classes), seed, dtype, device)


def mobilenet_v1(classes: int = 1000, *, width: float = 1.0, seed: int = 0, dtype: torch.dtype | None = None,
                 device=None) -> MobileNetV1:
    """MobileNetV1 at width multiplier ``width`` (1.0: 32 -> 1024 channels), in eval mode."""
    return _built(lambda: MobileNetV1(width, classes), seed, dtype, device)


def tiny_resnet() -> ResNet:
    """Two stages of one bottleneck each, 8 stem channels (8 -> 64), 10 classes."""
    return resnet50(10, blocks=(1, 1), width=8)


def tiny_mobilenet() -> MobileNetV1:
    """The stem and four depthwise-separable blocks (8 -> 32 channels), 10 classes."""
    return _built(lambda: MobileNetV1(0.25, 10, blocks=(64, (128, 2), 128, (128, 2))), 0, None, None)


MODELS = {"resnet50": resnet50, "mobilenet-v1": mobilenet_v1}
