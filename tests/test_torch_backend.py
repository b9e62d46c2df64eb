"""torch.compile(model, backend="mlfuse"): the zoo models against eager, partitioning around
ops mlfuse lacks, recompiles on new shapes, inference_mode/no_grad, and the report.

The zoo models compile in tens of seconds each on a cold cache (mlfuse's own compile time,
the same as its ONNX path); reruns come from the disk cache in ~/.cache/mlfuse.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mlfuse.torch_backend as tb  # noqa: E402


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double(), want.double()
    return float((got - want).abs().max() / max(want.abs().max().item(), 1e-30))


def run(fn, *inputs, dynamic=False):
    """(eager result, compiled result, the reports of this compile)."""
    torch._dynamo.reset()
    before = len(tb.reports())
    with torch.no_grad():
        want = fn(*inputs)
        got = torch.compile(fn, backend="mlfuse", dynamic=dynamic)(*inputs)
    return want, got, tb.reports()[before:]


def assert_close(got, want, tol=1e-5):
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype == torch.bool or not w.dtype.is_floating_point:
            assert torch.equal(g, w)
        else:
            assert relative_error(g, w) < tol, f"relative error {relative_error(g, w):.2e}"


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.norm, self.fc2 = torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x)))).softmax(-1)


class WithCumsum(torch.nn.Module):
    """A cumsum (no graph-dialect op) between two parts mlfuse compiles."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.cumsum(h, dim=-1) / 64
        return torch.tanh(self.fc2(h)) * 2 + 1


def test_backend_is_registered():
    assert "mlfuse" in torch._dynamo.list_backends()


# --- the zoo -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["resnet18", "bert", "vit", "mlp_mixer"])
def test_zoo_model_matches_eager(name):
    if name == "bert":
        pytest.importorskip("transformers")
    from bench.models import ZOO

    module, inputs = ZOO[name].build("small")
    want, got, reports = run(module, *inputs)
    assert_close(got, want)
    (report,) = reports
    assert report.fallback is None and report.kernels
    assert all(k.error is None for k in report.kernels), report.summary()
    assert report.eager == [], report.summary()  # every op runs in mlfuse


# --- partitioning ---------------------------------------------------------------------------


def test_unsupported_op_is_partitioned_to_eager():
    want, got, (report,) = run(WithCumsum().eval(), torch.randn(8, 32))
    assert_close(got, want)
    assert report.eager == [("aten.cumsum", "no converter")]
    assert len([k for k in report.kernels if k.error is None]) == 2
    assert report.mlfuse_ops == report.ops - 1


def test_mlfuse_log_shows_the_partition(monkeypatch, capsys):
    monkeypatch.setenv("MLFUSE_LOG", "1")
    run(WithCumsum().eval(), torch.randn(4, 32))
    err = capsys.readouterr().err
    assert "[mlfuse] graph" in err and "2 mlfuse subgraph(s)" in err
    assert "eager  aten.cumsum: no converter" in err
    assert "mlfuse mlfuse_" in err and "aten.addmm" in err


def test_no_log_without_mlfuse_log(monkeypatch, capsys):
    monkeypatch.delenv("MLFUSE_LOG", raising=False)
    run(WithCumsum().eval(), torch.randn(4, 32))
    assert "[mlfuse]" not in capsys.readouterr().err


def test_several_unsupported_ops_and_dtypes():
    """sort, flip and a bf16 island run in eager; the rest in mlfuse."""

    def f(x):
        s = torch.sort(x, dim=-1).values
        b = (x.to(torch.bfloat16) * 2).float()
        return torch.exp(s) + b + torch.flip(x, [0]).sigmoid()

    want, got, (report,) = run(f, torch.randn(4, 8))
    assert_close(got, want)
    eager = dict(report.eager)
    assert "aten.sort" in eager and "aten.flip" in eager
    assert any("bfloat16" in reason for reason in eager.values())
    assert report.mlfuse_ops > 0


def test_a_kernel_that_fails_to_compile_runs_eagerly():
    """A compile error (here: a pipeline mlfuse rejects) leaves that subgraph to torch."""
    torch._dynamo.reset()
    model, x = Mlp().eval(), torch.randn(8, 32)
    before = len(tb.reports())
    with torch.no_grad():
        got = torch.compile(model, backend="mlfuse", dynamic=False, options={"passes": ["no-such-pass"]})(x)
        assert_close(got, model(x))
    (report,) = tb.reports()[before:]
    assert report.kernels and all(k.error and "no-such-pass" in k.error for k in report.kernels)
    assert "FAILED, ran eagerly" in report.summary()


# --- op coverage (each function's ops all convert) ----------------------------------------------


def elementwise(x, y):
    a = torch.clamp(x, -0.5, 0.7) + F.hardtanh(y) * 2 - torch.sigmoid(x) / (y.abs() + 1)
    b = torch.where(x > y, torch.exp(-x * x), torch.tanh(y)) ** 2 + torch.rsqrt(x * x + 1) - (y * y + 1).sqrt()
    c = F.silu(x) + F.gelu(y, approximate="tanh") + F.leaky_relu(x, 0.1) + torch.erf(y) + torch.log(x.abs() + 1)
    d = torch.maximum(x, y) - torch.minimum(x, 0.1 * y) + torch.pow(x.abs() + 1, y) + 1.0 / (x.abs() + 1)
    d = d + torch.sin(x) * torch.cos(y)  # rotary embeddings' angles
    return a, b, c, d + x.pow(3) + torch.add(x, y, alpha=0.5) + torch.sub(x, y, alpha=2) + (3 - x)


def reductions(x, y):
    r = x.sum(dim=(0, 2), keepdim=True) + x.mean(-1, keepdim=True).amax(1, keepdim=True)
    s = x.var(dim=-1, keepdim=True) + torch.var(x, dim=1, unbiased=False, keepdim=True)
    t = x.max(dim=1, keepdim=True).values + x.amin(dim=-1, keepdim=True) + x.prod(-1, keepdim=True)
    return r, s, t, torch.log_softmax(y, -1), torch.softmax(y, 1), x.sum()


def ints_and_masks(x, y):
    i = (x * 10).to(torch.int64)
    m = (i > 2) & (y < 0.5) | ~(x == y)
    n = torch.logical_and(m, i != 0) | torch.logical_not(m)
    k = torch.arange(x.shape[-1]) + i
    # bools order False < True (compared as signed bits, these had been wrong)
    o = torch.stack([m > n, m <= n, torch.maximum(m, n), torch.minimum(m, n)])
    return torch.where(n, x, y), m, k, i // 3, i % 3, i.sum(-1), x.to(torch.float64) * 2, o


def movement(x, y):
    a, b = x.split([3, 5], dim=-1)
    e = F.pad(x, (1, 2, 0, 1), value=0.5)
    u = torch.stack([x[:, 0], y[:, -1]], dim=1)
    d = x[:, 1:3].transpose(1, 2).reshape(x.shape[0], -1)
    return (torch.cat([b, a], dim=-1), e, u, d, x.unsqueeze(1).expand(4, 3, 8, 8),
            torch.unbind(x, 1)[2], x[:, ::2].permute(2, 0, 1))


def windows(x, w, bn):
    y = F.conv2d(x, w, torch.ones(8), stride=2, padding=1)
    return (y, F.max_pool2d(y, 3, 2, 1), F.avg_pool2d(y, 3, 2, 1), F.adaptive_avg_pool2d(x[..., :8, :8], 4),
            F.adaptive_avg_pool2d(y, 1), F.max_pool2d(x, 2, 2, ceil_mode=True),
            F.conv1d(x.flatten(2), w[:, :, 0], None, padding=1),
            F.batch_norm(y, torch.zeros(8), torch.ones(8) * 2, bn, None, False, 0.1, 1e-5),
            F.layer_norm(y, (5,)), F.conv2d(x, w[:, :1], None, groups=4, dilation=2))


def gathers(table, ids, index):
    rows, cols = ids[:2, :, None] % 10 - 3, index[:4, 0] - 2  # negative indices wrap
    return (F.embedding(ids, table), torch.gather(table, 1, index), table[ids[0]], table[:, index[:3, 1]],
            (table * 2)[rows, cols], table.exp()[None][:, ids % 10, 1:3])


def _cases():
    torch.manual_seed(0)
    return {
        "elementwise": (elementwise, (torch.randn(4, 6, 8), torch.randn(4, 6, 8))),
        "reductions": (reductions, (torch.randn(4, 6, 8), torch.randn(4, 6, 8))),
        "ints_and_masks": (ints_and_masks, (torch.rand(4, 6, 8), torch.rand(4, 6, 8))),
        "movement": (movement, (torch.randn(4, 8, 8), torch.randn(4, 8, 8))),
        "windows": (windows, (torch.randn(2, 4, 9, 9), torch.randn(8, 4, 3, 3), torch.randn(8))),
        "gathers": (gathers, (torch.randn(10, 5), torch.randint(0, 10, (3, 4)), torch.randint(0, 5, (10, 2)))),
    }


@pytest.mark.parametrize("case", sorted(_cases()))
def test_ops_convert_and_match_eager(case):
    fn, inputs = _cases()[case]
    want, got, (report,) = run(fn, *inputs)
    assert_close(got, want)
    assert report.eager == [] and all(k.error is None for k in report.kernels), report.summary()


def test_converter_reasons():
    """why_unsupported names the reason for an op it cannot convert."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: torch.cumsum(x, 0) + x.to(torch.bfloat16).float(), tracing_mode="fake")(torch.randn(4))
    reasons = {tb._op_name(n): tb.why_unsupported(n) for n in gm.graph.nodes if n.op == "call_function"}
    assert reasons["aten.cumsum"] == "no converter"
    assert "bfloat16" in reasons["aten._to_copy"]
    assert reasons["aten.add"] is None


# --- guards and recompiles -------------------------------------------------------------------


def test_new_shape_recompiles_and_old_shape_does_not():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    model = Mlp().eval()
    compiled = torch.compile(model, backend="mlfuse", dynamic=False)
    before, graphs = len(tb.reports()), counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for rows, expected in ((8, 1), (16, 2), (8, 2), (16, 2)):  # compiles so far
            x = torch.randn(rows, 32)
            assert_close(compiled(x), model(x))
            compiles = len(tb.reports()) - before
            assert compiles == expected, f"{compiles} compiles after rows={rows}"
    assert counters["stats"]["unique_graphs"] - graphs == 2


def test_dynamic_shapes_are_specialized():
    """With dynamo's automatic dynamic shapes, the symbolic graph is compiled once per
    concrete shape when it is first called with it."""
    torch._dynamo.reset()
    model = Mlp().eval()
    compiled = torch.compile(model, backend="mlfuse")
    before = len(tb.reports())
    with torch.no_grad():
        for rows in (8, 16, 24, 16):
            x = torch.randn(rows, 32)
            assert_close(compiled(x), model(x))
    reports = tb.reports()[before:]
    static = [r for r in reports if r.kernels]
    assert len(static) == 3  # 8, 16 and 24: the second 16 reuses its specialization
    assert all(not r.eager for r in static)


def test_options_reach_mlfuse_compile():
    model, x = Mlp().eval(), torch.randn(8, 32)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="mlfuse", dynamic=False, options={"planner": "greedy"})(x)
        assert_close(got, model(x))
        torch._dynamo.reset()
        with pytest.raises(Exception, match="unknown mlfuse option"):
            torch.compile(model, backend="mlfuse", dynamic=False, options={"bogus": 1})(x)


def test_guard_filter_is_torchs_option_not_mlfuses():
    """torch.compile takes `guard_filter_fn` itself (the documented way to cut dynamo's
    per-call guard cost), so the backend neither sees nor rejects it."""
    model, x = Mlp().eval(), torch.randn(8, 32)
    torch._dynamo.reset()
    before = len(tb.reports())
    options = {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
    with torch.no_grad():
        got = torch.compile(model, backend="mlfuse", dynamic=False, options=options)(x)
    assert_close(got, model(x))
    assert tb.reports()[before].kernels


# --- grad modes --------------------------------------------------------------------------------


def test_inference_mode_and_no_grad():
    model, x = Mlp().eval(), torch.randn(8, 32)
    want = model(x).detach()
    for mode in (torch.no_grad, torch.inference_mode):
        torch._dynamo.reset()
        before = len(tb.reports())
        with mode():
            got = torch.compile(model, backend="mlfuse", dynamic=False)(x)
        assert_close(got, want)
        assert tb.reports()[before].kernels, mode.__name__


def test_grad_required_falls_back_to_eager():
    torch._dynamo.reset()
    model, x = Mlp().eval(), torch.randn(8, 32)
    before = len(tb.reports())
    got = torch.compile(model, backend="mlfuse", dynamic=False)(x)
    assert got.requires_grad and got.grad_fn is not None
    assert_close(got.detach(), model(x).detach())
    (report,) = tb.reports()[before:]
    assert "gradients are required" in report.fallback


# --- the runtime: no copies --------------------------------------------------------------------


def _one_kernel(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx

    compiled = tb.compile_fx_graph(make_fx(fn, tracing_mode="fake")(*inputs), list(inputs))
    (kernel,) = [m for m in compiled.modules() if isinstance(m, tb.MlfuseKernel)]
    return compiled, kernel


def test_kernels_take_addresses_and_return_aligned_torch_tensors():
    def f(x):
        return (x - x.mean(-1, keepdim=True)).exp()

    x = torch.randn(64, 128)
    compiled, kernel = _one_kernel(f, x)
    assert kernel.direct  # by address: no numpy views or checks per call
    (y,) = kernel(x)
    assert isinstance(y, torch.Tensor) and y.data_ptr() % 64 == 0  # no staging copy in the runtime
    assert_close(y, f(x))
    assert_close(compiled(x), f(x))
    assert_close(compiled.forward(x), f(x))  # what the backend hands to AOTAutograd


def test_a_strided_input_is_made_contiguous_for_the_kernel():
    def f(x):
        return torch.tanh(x) * 2

    x = torch.randn(32, 48)
    compiled, kernel = _one_kernel(f, x)
    strided = torch.randn(48, 32).t()  # same shape, column-major
    assert not strided.is_contiguous()
    assert_close(kernel(strided)[0], f(strided))
    assert_close(compiled(strided), f(strided))


def test_kernel_without_the_address_call_goes_through_numpy():
    """A compiled function that only takes numpy arrays (the generic call) still works."""

    class NumpyOnly:
        def __init__(self, fn):
            self.fn, self.inputs, self.outputs = fn, fn.inputs, fn.outputs

        def __call__(self, *arrays, out=None):
            return self.fn(*arrays, out=out)

    def f(x):
        return x.softmax(-1)

    x = torch.randn(8, 16)
    _, kernel = _one_kernel(f, x)
    plain = tb.MlfuseKernel(NumpyOnly(kernel.fn), kernel.output_specs)
    assert not plain.direct
    assert_close(plain(x)[0], f(x))
    assert np.shares_memory(tb._as_numpy(x), x.numpy())


# --- frozen parameters -------------------------------------------------------------------------


class LinearBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc, self.bn = torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32)
        self.bn.running_mean.normal_()
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x)))


def kernel_inputs(report) -> int:
    return sum(k.inputs for k in report.kernels)


def test_parameters_are_frozen_into_constants():
    """Weights and batch-norm statistics become constants: the kernel takes x alone."""
    model, x = LinearBatchNorm().eval(), torch.randn(4, 16)
    want, got, reports = run(model, x)
    assert_close(got, want)
    assert [kernel_inputs(r) for r in reports if r.kernels] == [1]


def test_in_place_parameter_update_recompiles():
    model, x = LinearBatchNorm().eval(), torch.randn(4, 16)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="mlfuse", dynamic=False)
    with torch.no_grad():
        assert_close(compiled(x), model(x))
        model.fc.weight.mul_(-2.0)  # bumps the version counter
        model.bn.running_var.fill_(3.0)
        assert_close(compiled(x), model(x))
        model.load_state_dict(LinearBatchNorm().state_dict())
        assert_close(compiled(x), model(x))
        model.fc.weight = torch.nn.Parameter(torch.randn(32, 16))  # a new tensor object
        assert_close(compiled(x), model(x))


def test_freeze_false_keeps_parameters_as_inputs():
    model, x = LinearBatchNorm().eval(), torch.randn(4, 16)
    torch._dynamo.reset()
    before = len(tb.reports())
    with torch.no_grad():
        got = torch.compile(model, backend="mlfuse", dynamic=False, options={"freeze": False})(x)
        assert_close(got, model(x))
    assert [kernel_inputs(r) for r in tb.reports()[before:] if r.kernels] == [7]
