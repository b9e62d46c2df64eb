"""The benchmarks in Halide (PyPI `halide`), scheduled by Halide's auto-schedulers.

Each builder returns (output Func, input ImageParams): the same computation as
apps.py, with Halide's dimension order (x = the last numpy axis). `compile_app`
applies an auto-scheduler (Mullapudi2016, Li2018, Adams2019; the plugins ship in
the wheel) given the estimates of the actual sizes, JIT-compiles, and returns a
callable on numpy arrays.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

AUTOSCHEDULERS = ("Mullapudi2016", "Li2018", "Adams2019")


def halide():
    import halide as hl  # pyright: ignore[reportMissingImports]  (optional)

    libdir = os.path.join(os.path.dirname(hl.__file__), "lib64")
    for name in AUTOSCHEDULERS:
        path = os.path.join(libdir, f"libautoschedule_{name.lower()}.so")
        if os.path.exists(path) and name not in _LOADED:
            hl.load_plugin(path)
            _LOADED.add(name)
    return hl


_LOADED: set[str] = set()


def _params(hl, shapes: Sequence[Sequence[int]]):
    params = []
    for k, shape in enumerate(shapes):
        p = hl.ImageParam(hl.Float(32), len(shape), f"in{k}")
        p.set_estimates([hl.Range(0, n) for n in reversed(shape)])
        params.append(p)
    return params


def blur(hl, shapes):
    (inp,) = _params(hl, shapes)
    x, y = hl.Var("x"), hl.Var("y")
    third = hl.f32(1 / 3)
    bx, by = hl.Func("bx"), hl.Func("by")
    bx[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) * third
    by[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) * third
    return by, [inp]


def unsharp(hl, shapes, weight=3.0, thresh=0.001):
    (img,) = _params(hl, shapes)
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    f = hl.f32
    bx, by, sharpen, mask = hl.Func("blurx"), hl.Func("blury"), hl.Func("sharpen"), hl.Func("mask")
    bx[x, y, c] = (img[x, y, c] + img[x, y + 1, c] * f(4) + img[x, y + 2, c] * f(6) + img[x, y + 3, c] * f(4) + img[x, y + 4, c]) * f(1 / 16)
    by[x, y, c] = (bx[x, y, c] + bx[x + 1, y, c] * f(4) + bx[x + 2, y, c] * f(6) + bx[x + 3, y, c] * f(4) + bx[x + 4, y, c]) * f(1 / 16)
    center = img[x + 2, y + 2, c]
    sharpen[x, y, c] = center * f(1 + weight) - by[x, y, c] * f(weight)
    mask[x, y, c] = hl.select(hl.abs(center - by[x, y, c]) < f(thresh), center, sharpen[x, y, c])
    return mask, [img]


def harris(hl, shapes):
    (img,) = _params(hl, shapes)
    x, y = hl.Var("x"), hl.Var("y")
    c = hl.f32(1 / 12)

    def at(dx, dy):  # numpy's at(dx, dy): rows shifted by dx (y), columns by dy (x)
        return img[x + 1 + dy, y + 1 + dx]

    iy, ix = hl.Func("Iy"), hl.Func("Ix")
    iy[x, y] = at(-1, -1) * -c + at(-1, 1) * c + at(0, -1) * (-2 * c) + at(0, 1) * (2 * c) + at(1, -1) * -c + at(1, 1) * c
    ix[x, y] = at(-1, -1) * -c + at(1, -1) * c + at(-1, 0) * (-2 * c) + at(1, 0) * (2 * c) + at(-1, 1) * -c + at(1, 1) * c
    ixx, iyy, ixy = hl.Func("Ixx"), hl.Func("Iyy"), hl.Func("Ixy")
    ixx[x, y] = ix[x, y] * ix[x, y]
    iyy[x, y] = iy[x, y] * iy[x, y]
    ixy[x, y] = ix[x, y] * iy[x, y]

    def box(v, name):
        s = hl.Func(name)
        total = None
        for dx in range(3):
            for dy in range(3):
                part = v[x + dy, y + dx]
                total = part if total is None else total + part
        s[x, y] = total
        return s

    sxx, syy, sxy = box(ixx, "Sxx"), box(iyy, "Syy"), box(ixy, "Sxy")
    out = hl.Func("harris")
    det = sxx[x, y] * syy[x, y] - sxy[x, y] * sxy[x, y]
    trace = sxx[x, y] + syy[x, y]
    out[x, y] = det - hl.f32(0.04) * trace * trace
    return out, [img]


def convnet(hl, shapes):
    inp, w1, w2 = _params(hl, shapes)
    n_, c_, h_, w_ = shapes[0]
    o1, o2 = shapes[1][0], shapes[2][0]
    x, y, c, n = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("n")

    def conv(src, weight, channels, name):
        padded = hl.BoundaryConditions.constant_exterior(src, hl.f32(0), [(0, w_), (0, h_), (0, channels), (0, n_)])
        r = hl.RDom([hl.Range(0, channels), hl.Range(0, 3), hl.Range(0, 3)])
        out = hl.Func(name)
        out[x, y, c, n] = hl.f32(0)
        out[x, y, c, n] += padded[x + r.z - 1, y + r.y - 1, r.x, n] * weight[r.z, r.y, r.x, c]
        return out

    c1 = conv(inp, w1, c_, "conv1")
    relu = hl.Func("relu")
    relu[x, y, c, n] = hl.max(c1[x, y, c, n], hl.f32(0))
    del o1, o2
    return conv(relu, w2, shapes[1][0], "conv2"), [inp, w1, w2]


def mm2(hl, shapes, alpha=1.5, beta=1.2):
    a, b, c, d = _params(hl, shapes)
    i, j = hl.Var("i"), hl.Var("j")
    nk, nj = shapes[0][1], shapes[1][1]
    rk, rj = hl.RDom([hl.Range(0, nk)]), hl.RDom([hl.Range(0, nj)])
    prod, tmp, out = hl.Func("prod"), hl.Func("tmp"), hl.Func("D")
    prod[j, i] = hl.f32(0)
    prod[j, i] += a[rk.x, i] * b[j, rk.x]
    tmp[j, i] = prod[j, i] * hl.f32(alpha)
    acc = hl.Func("acc")
    acc[j, i] = hl.f32(0)
    acc[j, i] += tmp[rj.x, i] * c[j, rj.x]
    out[j, i] = acc[j, i] + d[j, i] * hl.f32(beta)
    return out, [a, b, c, d]


def gemver(hl, shapes, alpha=1.5, beta=1.2):
    a, u1, v1, u2, v2, y, z = _params(hl, shapes)
    n = shapes[0][0]
    i, j = hl.Var("i"), hl.Var("j")
    ah, xs, xv, ws, w = hl.Func("ah"), hl.Func("xs"), hl.Func("x"), hl.Func("ws"), hl.Func("w")
    ah[j, i] = a[j, i] + u1[i] * v1[j] + u2[i] * v2[j]
    r = hl.RDom([hl.Range(0, n)])
    xs[j] = hl.f32(0)
    xs[j] += ah[j, r.x] * y[r.x]
    xv[j] = xs[j] * hl.f32(beta) + z[j]
    ws[i] = hl.f32(0)
    ws[i] += ah[r.x, i] * xv[r.x]
    w[i] = ws[i] * hl.f32(alpha)
    return w, [a, u1, v1, u2, v2, y, z]


BUILDERS: dict[str, Callable] = {
    "blur": blur, "unsharp": unsharp, "harris": harris, "convnet": convnet, "2mm": mm2, "gemver": gemver,
}


def compile_app(name: str, input_shapes: Sequence[Sequence[int]], output_shape: Sequence[int],
                scheduler: str, threads: int) -> Callable[..., np.ndarray]:
    """A callable on numpy arrays running the app scheduled by `scheduler`."""
    hl = halide()
    out, params = BUILDERS[name](hl, [tuple(s) for s in input_shapes])
    out.set_estimates([hl.Range(0, n) for n in reversed(output_shape)])
    pipeline = hl.Pipeline(out)
    target = hl.get_jit_target_from_environment()
    options = {"parallelism": str(threads)}
    if scheduler == "Mullapudi2016":
        options["last_level_cache_size"] = str(32 << 20)
    pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(scheduler, options))
    pipeline.compile_jit(target)
    result = hl.Buffer(hl.Float(32), list(reversed(output_shape)))

    def run(*arrays: np.ndarray) -> np.ndarray:
        for p, a in zip(params, arrays):
            p.set(hl.Buffer(a))
        pipeline.realize(result)
        return np.asarray(result)

    return run


def _probe_child(name, input_shapes, output_shape, scheduler, threads, limit_bytes, queue) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    try:
        rng = np.random.default_rng(0)
        run = compile_app(name, input_shapes, output_shape, scheduler, threads)
        run(*[rng.uniform(0.1, 1.0, s).astype(np.float32) for s in input_shapes])
        queue.put("ok")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")


def probe(name: str, input_shapes, output_shape, scheduler: str, threads: int, limit_gb: float = 6.0) -> str:
    """Schedule, compile and run once in a child process with a memory limit: "ok", or why not.
    (Some auto-schedulers exhaust memory or crash on some pipelines; the parent must survive.)"""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_probe_child, args=(name, [tuple(s) for s in input_shapes], tuple(output_shape),
                                                   scheduler, threads, int(limit_gb * (1 << 30)), queue))
    child.start()
    child.join(600)
    if child.is_alive():
        child.kill()
        return "timed out"
    try:
        return queue.get(timeout=1)
    except Exception:  # noqa: BLE001
        return f"crashed (exit code {child.exitcode}; out of memory under a {limit_gb:g} GB limit?)"
