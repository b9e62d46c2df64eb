"""The benchmarks, each written once against a numpy-like namespace.

`np_ops` runs a definition op by op with numpy (the baseline peer); `GraphOps`
runs the same definition on `mlfuse.frontend.builder` tensors to build the graph
that mlfuse compiles, so both peers compute the same thing by construction.

- blur:     separable 3x3 box blur (Halide's classic example)
- unsharp:  PolyMage's unsharp mask, 5-tap Gaussian, 3 channels (2048x2048x3)
- harris:   PolyMage's Harris corners: Sobel, products, 3x3 box sums, response
- convnet:  conv3x3 -> ReLU -> conv3x3 (NCHW, pads 1)
- 2mm:      PolyBench 2mm, D = alpha A B C + beta D
- gemver:   PolyBench gemver, A' = A + u1 v1^T + u2 v2^T, x = beta A'^T y + z, w = alpha A' x
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


class NumpyOps:
    """The numpy side of the namespace the definitions use."""

    where = staticmethod(np.where)
    matmul = staticmethod(np.matmul)

    @staticmethod
    def relu(x):
        return np.maximum(x, np.float32(0))

    @staticmethod
    def conv2d(x, w, pads):
        from mlfuse.reference import windows

        patches = windows(x, w.shape[2:], (1, 1), pads, (1, 1), 0)  # n c oh ow kh kw
        return np.einsum("nchwij,ocij->nohw", patches, w, optimize=True).astype(np.float32)

    @staticmethod
    def sum(x, axis):
        return np.sum(x, axis=axis)

    @staticmethod
    def outer(u, v):
        return np.multiply.outer(u, v)


class GraphOps:
    """The graph-builder side: same calls, building graph-dialect ops."""

    def __init__(self, builder):
        self.b = builder

    def where(self, c, a, b):
        return self.b.where(c, a, b)

    def matmul(self, a, b):
        return self.b.matmul(a, b)

    def relu(self, x):
        return self.b.relu(x)

    def conv2d(self, x, w, pads):
        return self.b.conv2d(x, w, pads=pads)

    def sum(self, x, axis):
        return self.b.reduce_sum(x, axis=axis)

    def outer(self, u, v):
        (n,), (m,) = u.shape, v.shape
        return self.b.broadcast_to(self.b.reshape(u, (n, 1)), (n, m)) * self.b.broadcast_to(self.b.reshape(v, (1, m)), (n, m))


def blur(ops, x):
    third = np.float32(1 / 3)
    bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) * third
    return ((bx[:-2] + bx[1:-1] + bx[2:]) * third,)


def unsharp(ops, img, weight=3.0, thresh=0.001):
    """PolyMage unsharp_mask: img (3, R+4, C+4) -> (3, R, C)."""
    f = np.float32
    bx = (img[:, :-4] + img[:, 1:-3] * f(4) + img[:, 2:-2] * f(6) + img[:, 3:-1] * f(4) + img[:, 4:]) * f(1 / 16)
    by = (bx[:, :, :-4] + bx[:, :, 1:-3] * f(4) + bx[:, :, 2:-2] * f(6) + bx[:, :, 3:-1] * f(4) + bx[:, :, 4:]) * f(1 / 16)
    center = img[:, 2:-2, 2:-2]
    sharpen = center * f(1 + weight) - by * f(weight)
    return (ops.where(abs(center - by) < f(thresh), center, sharpen),)


def harris(ops, img):
    """PolyMage harris: img (R+2, C+2) -> (R-2, C-2)."""
    f = np.float32
    c = f(1 / 12)

    def at(dx, dy):  # img(x + dx, y + dy) over the (R, C) interior
        r, s = img.shape
        return img[1 + dx : r - 1 + dx, 1 + dy : s - 1 + dy]

    iy = (at(-1, -1) * -c + at(-1, 1) * c + at(0, -1) * (-2 * c) + at(0, 1) * (2 * c) + at(1, -1) * -c + at(1, 1) * c)
    ix = (at(-1, -1) * -c + at(1, -1) * c + at(-1, 0) * (-2 * c) + at(1, 0) * (2 * c) + at(-1, 1) * -c + at(1, 1) * c)
    ixx, iyy, ixy = ix * ix, iy * iy, ix * iy

    def box(v):
        r, s = v.shape
        total = None
        for dx in range(3):
            for dy in range(3):
                part = v[dx : r - 2 + dx, dy : s - 2 + dy]
                total = part if total is None else total + part
        return total

    sxx, syy, sxy = box(ixx), box(iyy), box(ixy)
    det = sxx * syy - sxy * sxy
    trace = sxx + syy
    return (det - f(0.04) * trace * trace,)


def convnet(ops, x, w1, w2):
    return (ops.conv2d(ops.relu(ops.conv2d(x, w1, (1, 1, 1, 1))), w2, (1, 1, 1, 1)),)


def mm2(ops, a, b, c, d, alpha=1.5, beta=1.2):
    f = np.float32
    tmp = ops.matmul(a, b) * f(alpha)
    return (ops.matmul(tmp, c) + d * f(beta),)


def gemver(ops, a, u1, v1, u2, v2, y, z, alpha=1.5, beta=1.2):
    f = np.float32
    ah = a + ops.outer(u1, v1) + ops.outer(u2, v2)
    x = ops.sum(ah * y.reshape(-1, 1) if isinstance(y, np.ndarray) else ah * _column(ops, y, ah.shape), 0) * f(beta) + z
    xb = x.reshape(1, -1) if isinstance(x, np.ndarray) else _row(ops, x, ah.shape)
    w = ops.sum(ah * xb, 1) * f(alpha)
    return (w,)


def _column(ops, v, shape):
    b = ops.b
    return b.broadcast_to(b.reshape(v, (shape[0], 1)), shape)


def _row(ops, v, shape):
    b = ops.b
    return b.broadcast_to(b.reshape(v, (1, shape[1])), shape)


@dataclass(frozen=True)
class App:
    name: str
    fn: Callable
    shapes: dict[str, tuple[int, ...]]
    description: str
    tile_sizes: tuple[int, ...] | None = None  # None: the analytical default
    small: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def inputs(self, seed: int = 0, small: bool = False) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        shapes = self.small if small else self.shapes
        return [rng.uniform(0.1, 1.0, s).astype(np.float32) for s in shapes.values()]

    def numpy(self, *arrays):
        return self.fn(NumpyOps, *arrays)

    def module(self, small: bool = False):
        from mlfuse.frontend.builder import GraphBuilder

        b = GraphBuilder("main")
        shapes = self.small if small else self.shapes
        args = [b.input(name, shape, "f32") for name, shape in shapes.items()]
        b.output(*self.fn(GraphOps(b), *args))
        return b.module()


APPS: dict[str, App] = {
    a.name: a
    for a in [
        App("blur", blur, {"x": (4098, 4098)}, "separable 3x3 box blur, 4096x4096",
            small={"x": (37, 70)}),
        App("unsharp", unsharp, {"img": (3, 2052, 2052)}, "unsharp mask, 2048x2048x3",
            small={"img": (3, 21, 44)}),
        App("harris", harris, {"img": (4098, 4098)}, "Harris corners, 4096x4096",
            small={"img": (35, 53)}),
        App("convnet", convnet, {"x": (1, 32, 256, 256), "w1": (32, 32, 3, 3), "w2": (32, 32, 3, 3)},
            "conv3x3 -> ReLU -> conv3x3, 1x32x256x256", small={"x": (1, 4, 13, 21), "w1": (4, 4, 3, 3), "w2": (4, 4, 3, 3)}),
        App("2mm", mm2, {"a": (800, 1100), "b": (1100, 900), "c": (900, 1200), "d": (800, 1200)},
            "PolyBench 2mm (LARGE)", small={"a": (13, 11), "b": (11, 9), "c": (9, 17), "d": (13, 17)}),
        App("gemver", gemver, {k: s for k, s in zip(["a", "u1", "v1", "u2", "v2", "y", "z"], [(2000, 2000)] + [(2000,)] * 6)},
            "PolyBench gemver (LARGE)", small={k: s for k, s in zip(["a", "u1", "v1", "u2", "v2", "y", "z"], [(19, 19)] + [(19,)] * 6)}),
    ]
}
