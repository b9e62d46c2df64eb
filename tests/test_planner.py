"""The fusion planner: cost model, candidates, ILP, rule-based planners, rewrite, report."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from xdsl.dialects import func

from mlfuse.analysis import ilp as ilp_module
from mlfuse.analysis.candidates import (
    CandidatePool,
    absorb_producers,
    check_pattern,
    generate_candidates,
    pattern_reduction,
)
from mlfuse.analysis.cost_model import GLOBAL, REGISTER, SHARED, CostModel, TargetParams
from mlfuse.analysis.fusion_graph import MANY_READERS, FusionGraph, bits
from mlfuse.analysis.ilp import ConflictIndex, find_kernel_cycle, solve_ilp
from mlfuse.analysis.plan_module import PlanOptions, fuse_module, parse_param_overrides, resolve_no_fuse
from mlfuse.analysis.planners import PLANNERS, plan_function, post_dominators
from mlfuse.diagnostics import Diagnostic, verify_located
from mlfuse.dialects import fusion
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.ir import parse_module
from mlfuse.reference import reference


def graph_of(module) -> FusionGraph:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return FusionGraph.from_function(fn)


def model_of(module, target: str = "gpu", **overrides) -> tuple[FusionGraph, CostModel]:
    g = graph_of(module)
    return g, CostModel(g, TargetParams.for_target(target, **overrides))


def mask_of(*indices: int) -> int:
    return sum(1 << i for i in indices)


def layernorm_module(rows: int = 128, cols: int = 768):
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    gamma, beta = b.input("gamma", (cols,)), b.input("beta", (cols,))
    mean = b.mean(x, axis=-1, keepdims=True)
    d = x - mean
    var = b.mean(d * d, axis=-1, keepdims=True)
    b.output(d * b.rsqrt(var + 1e-5) * gamma + beta)
    return b.module()


def softmax_module(rows: int = 64, cols: int = 1024):
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    e = b.exp(x - b.max(x, axis=-1, keepdims=True))
    b.output(e / b.sum(e, axis=-1, keepdims=True))
    return b.module()


def chain_module(n_ops: int = 2, shape=(4, 8)):
    b = GraphBuilder()
    t = b.input("x", shape)
    for k in range(n_ops):
        t = b.exp(t) if k % 2 == 0 else b.neg(t)
    b.output(t)
    return b.module()


# --- cost model -------------------------------------------------------------------------------


def test_bytes_cross_kernel_boundaries_only():
    g, m = model_of(chain_module(2))  # x -> exp -> neg, 4x8 f32 = 128 B each
    fused = m.cost(g.all_mask)
    assert fused.bytes == 256  # read x, write the result
    assert m.plan_bytes([1, 2]) == 512  # the intermediate is written and read back
    assert fused.inputs == (0,) and len(fused.outputs) == 1


def test_launch_overhead_per_kernel():
    g, m = model_of(chain_module(3), launch_us=100.0)
    split = m.plan_time([1, 2, 4])
    assert split - m.time(g.all_mask) >= 200.0  # two launches saved


def test_recompute_through_broadcast_or_shared_memory():
    b = GraphBuilder()
    v = b.input("v", (64, 1))
    y = b.input("y", (64, 256))
    b.output(b.exp(v) * y)  # exp, broadcast, mul
    module = b.module()
    g, m = model_of(module)
    kept = m.cost(g.all_mask)
    assert kept.stitch[0] == SHARED and kept.recompute_flops == 0 and kept.kind == "stitch"
    g, tight = model_of(module, onchip_bytes=0)
    recomputed = tight.cost(g.all_mask)
    assert recomputed.stitch[0] == REGISTER
    assert recomputed.recompute_flops == pytest.approx(8.0 * 64 * 255)  # exp is 8 units, 255 extra copies


def test_layernorm_stitches_through_shared_memory():
    g, m = model_of(layernorm_module())
    c = m.cost(g.all_mask)
    assert c.feasible and c.kind == "stitch"
    names = {g.nodes[i].mnemonic: s for i, s in c.stitch.items()}
    assert c.stitch[0] == SHARED  # the mean is broadcast back along its rows
    assert c.stitch[2] == SHARED  # x - mean feeds the variance and, a phase later, the output
    assert names["rsqrt"] == SHARED
    assert c.global_barriers == 0
    assert c.smem_bytes >= 768 * 4  # one row of x - mean


def test_cross_phase_value_falls_back_when_shared_memory_is_too_small():
    g, m = model_of(layernorm_module(), onchip_bytes=64)
    c = m.cost(g.all_mask)
    assert c.feasible
    assert c.stitch[2] in (REGISTER, GLOBAL)
    if c.stitch[2] == REGISTER:
        assert c.recompute_flops > 0 and c.bytes > m.cost(g.all_mask).inputs.__len__()
    _, roomy = model_of(layernorm_module())
    assert c.time_us > roomy.cost(g.all_mask).time_us


def test_column_reduction_broadcast_needs_global_stitching():
    b = GraphBuilder()
    x = b.input("x", (256, 64))
    b.output(x * b.sum(x, axis=0, keepdims=True))
    g, m = model_of(b.module())
    c = m.cost(g.all_mask)
    assert c.stitch[0] == GLOBAL and c.global_barriers == 1 and c.kind == "global"


def test_cpu_row_buffers_must_fit_the_core_cache():
    g, m = model_of(softmax_module(8, 1024), "cpu")
    c = m.cost(g.all_mask)
    exp_index = next(i for i in range(len(g)) if g.nodes[i].mnemonic == "exp")
    assert c.stitch[exp_index] == SHARED and c.smem_bytes <= m.params.onchip_bytes
    g, small = model_of(softmax_module(8, 1024), "cpu", onchip_bytes=1024)
    assert small.cost(g.all_mask).stitch[exp_index] in (REGISTER, GLOBAL)


def test_kinds():
    b = GraphBuilder()
    x, y = b.input("x", (16, 16)), b.input("y", (16, 16))
    e = b.exp(x)  # 0
    n = b.neg(y)  # 1
    s = b.sum(e, axis=1)  # 2
    mm = b.matmul(e, n)  # 3: fine-grained
    r = b.relu(mm)  # 4
    s2 = b.sum(x, axis=1)  # 5: sibling of exp (both read x)
    b.output(s, r, s2)
    g, m = model_of(b.module())
    assert m.cost(mask_of(0)).kind == "single"
    assert m.cost(mask_of(0, 2)).kind == "reduce"
    assert m.cost(mask_of(3, 4)).kind == "gemm"
    assert m.cost(mask_of(0, 1, 3)).kind == "gemm"  # prologue on both operands
    assert m.cost(mask_of(1, 5)).kind == "horizontal"  # unrelated: kernel packing
    assert m.cost(mask_of(2, 0, 5)).kind == "reduce"  # siblings reading x
    assert m.cost(mask_of(0, 1)).kind == "horizontal"


def test_resource_limits():
    g, m = model_of(chain_module(10), max_registers_per_thread=30)
    c = m.cost(g.all_mask)
    assert not c.feasible and c.category == "resource-limit" and "registers" in c.reason
    assert m.cost(mask_of(0, 1, 2)).feasible
    g, m = model_of(chain_module(10), block_threads=1024)
    assert m.cost(g.all_mask).feasible  # 36 registers x 1024 threads fit
    g, m = model_of(chain_module(40), block_threads=1024)
    c = m.cost(g.all_mask)
    assert not c.feasible and "no block fits" in c.reason
    b = GraphBuilder()
    x, y, z = b.input("x", (4,)), b.input("y", (4,)), b.input("z", (4,))
    b.output((x + y) * z)
    g, m = model_of(b.module(), max_operands=3)
    c = m.cost(g.all_mask)
    assert not c.feasible and "4 kernel operands > limit 3" in c.reason
    assert m.cost(1).feasible  # a single op always runs


def test_op_classes_that_cannot_share_a_kernel():
    b = GraphBuilder()
    x = b.input("x", (128, 768))
    w = b.input("w", (768, 768))
    q = b.input("q", (16, 16))
    big = b.matmul(x, w)  # 0: large
    big_out = b.relu(big)  # 1
    m1 = b.matmul(q, q)  # 2: fine
    m2 = b.matmul(m1, q)  # 3: fine
    s = b.sum(m2, axis=1)  # 4
    b.output(big_out, s)
    g, m = model_of(b.module())
    for mask, words in ((mask_of(0, 1), "large contraction"), (mask_of(2, 3), "one contraction"),
                        (mask_of(3, 4), "no reductions")):
        c = m.cost(mask)
        assert not c.feasible and c.category == "op-class" and words in c.reason


def test_target_params_are_documented_and_overridable():
    gpu, cpu = TargetParams.for_target("gpu"), TargetParams.for_target("cpu")
    assert gpu.onchip_bytes == 48 * 1024 and gpu.registers_per_unit and not cpu.registers_per_unit
    assert TargetParams.for_target("gpu", launch_us=1.5).launch_us == 1.5
    assert TargetParams.for_target("gpu", max_operands=8).max_operands == 8
    with pytest.raises(ValueError, match="unknown cost-model parameter 'bogus'"):
        TargetParams.for_target("gpu", bogus=1)
    with pytest.raises(ValueError, match="must be an integer"):
        TargetParams.for_target("gpu", max_operands=2.5)
    with pytest.raises(ValueError, match="unknown target"):
        TargetParams.for_target("tpu")
    assert parse_param_overrides(("launch_us:2", "onchip_bytes=16,max_operands:8")) == {
        "launch_us": 2.0, "onchip_bytes": 16.0, "max_operands": 8.0}


# --- candidates ----------------------------------------------------------------------------------


def test_non_convex_patterns_are_rejected_as_cycles():
    b = GraphBuilder()
    x = b.input("x", (128, 768))
    w = b.input("w", (768, 768))
    e = b.exp(x)  # 0
    mm = b.matmul(e, w)  # 1: large, runs alone
    b.output(e + mm)  # 2
    g, m = model_of(b.module())
    v = check_pattern(g, m, mask_of(0, 2), 64)
    assert not v.ok and v.category == "cycle" and "graph.matmul" in v.reason
    assert not g.is_convex(mask_of(0, 2)) and g.convex_closure(mask_of(0, 2)) == g.all_mask


def test_size_limit():
    g, m = model_of(chain_module(6))
    v = check_pattern(g, m, g.all_mask, 4)
    assert not v.ok and v.category == "size-limit"


def test_pattern_reduction_finds_whole_layernorm_with_top_k():
    g, m = model_of(layernorm_module())
    pool = CandidatePool(g, m, 64)
    best = pattern_reduction(pool, top_k=3)
    assert all(len(v) <= 3 for v in best.values())
    assert g.all_mask in pool.by_mask  # the one-kernel LayerNorm is among the candidates
    for cand in pool:
        assert g.is_convex(cand.mask) and cand.cost.feasible


def test_absorb_producers_takes_single_use_broadcasts():
    g, m = model_of(layernorm_module())
    gamma_bcast = next(i for i in range(len(g)) if g.nodes[i].mnemonic == "broadcast"
                       and g.values[g.nodes[i].operands[0]].ssa.name_hint == "gamma")
    consumer = g.succs[gamma_bcast][0]
    assert absorb_producers(g, mask_of(consumer), 64) & mask_of(gamma_bcast)


def test_exhaustive_and_pruned_candidates():
    g, m = model_of(softmax_module())
    exhaustive = generate_candidates(g, m, exhaustive_limit=12)
    assert "exhaustive" in {o for c in exhaustive for o in c.origins}
    assert g.all_mask in exhaustive.by_mask
    pruned = generate_candidates(g, m, exhaustive_limit=0)
    assert len(pruned) < len(exhaustive)
    assert all(c.origins != {"exhaustive"} for c in pruned)


def test_sibling_candidates_share_an_input():
    b = GraphBuilder()
    x = b.input("x", (64, 512))
    s1 = b.sum(x, axis=1)
    s2 = b.sum(x * x, axis=1)
    b.output(s1, s2)
    g, m = model_of(b.module())
    pool = generate_candidates(g, m, exhaustive_limit=0)
    assert any("sibling" in c.origins and c.mask == g.all_mask for c in pool)


@pytest.mark.parametrize("readers, joined", [(3, True), (MANY_READERS, False)])
def test_sibling_candidates_skip_widely_read_values(readers, joined):
    """Readers of one value are joined pairwise into sibling candidates, except for a value
    read by MANY_READERS or more ops (every layer's mask): its pairs would grow with the
    square of its readers."""
    b = GraphBuilder()
    x = b.input("x", (64, 512))
    b.output(*[b.sum(x * float(k + 2), axis=1) for k in range(readers)])
    g, m = model_of(b.module())
    pool = generate_candidates(g, m, exhaustive_limit=0)
    siblings = [c for c in pool if "sibling" in c.origins]
    assert bool(siblings) == joined, len(siblings)


# --- ILP -------------------------------------------------------------------------------------------


def three_cycle_module():
    """Kernels A, B, C that are pairwise fine but cyclic together."""
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    a1, b2, c2 = b.neg(x), b.exp(x), b.relu(x)  # 0 1 2
    b1, c1, a2 = b.neg(a1), b.neg(b2), b.neg(c2)  # 3 4 5
    b.output(a1 + a2, b1 + b2, c1 + c2)  # 6 7 8
    return b.module()


def test_lazy_cycle_cuts_break_longer_cycles():
    g = graph_of(three_cycle_module())
    a, b_, c = mask_of(0, 5, 6), mask_of(1, 3, 7), mask_of(2, 4, 8)
    for m in (a, b_, c):
        assert g.is_convex(m)
    conflicts = ConflictIndex(g, [a, b_, c])
    assert conflicts.all_pairs() == []  # pairwise they are fine
    assert sorted(find_kernel_cycle(g, [a, b_, c])) == [0, 1, 2]
    masks = [a, b_, c] + [1 << i for i in range(9)]
    costs = [1.0, 1.0, 1.0] + [10.0] * 9
    result = solve_ilp(g, masks, costs, 10.0, lambda: [1 << i for i in range(9)])
    assert result.status == "optimal" and result.cycle_cuts >= 1 and result.rounds >= 2
    assert result.objective == pytest.approx(32.0)
    assert find_kernel_cycle(g, result.groups) is None


def test_conflicting_pairs_are_found():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    p = b.neg(x)  # 0
    q = b.exp(p)  # 1
    r = b.relu(x)  # 2
    b.output(q + r, b.neg(r))  # 3 = add(q, r), 4 = neg(r)
    g = graph_of(b.module())
    assert not g.is_convex(mask_of(0, 3))  # 0 -> 1 -> 3 leaves and re-enters
    one_way = [mask_of(0, 2), mask_of(1, 4)]  # packs: 0 -> 1 and 2 -> 4 point the same way
    assert ConflictIndex(g, one_way).all_pairs() == []
    both_ways = [mask_of(0, 4), mask_of(1, 2)]  # 0 -> 1 but 2 -> 4: each waits on the other
    assert ConflictIndex(g, both_ways).all_pairs() == [(0, 1)]
    assert find_kernel_cycle(g, [*both_ways, mask_of(3)]) is not None
    result = solve_ilp(g, [*both_ways, *(1 << i for i in range(5))], [1.0, 1.0] + [5.0] * 5, 10.0,
                       lambda: [])
    assert result.status == "optimal" and result.conflicts == 1
    assert result.objective == pytest.approx(1.0 + 3 * 5.0)


def fake_milp(status: int, x, message: str = "fake"):
    def run(c, **kwargs):
        return SimpleNamespace(status=status, x=None if x is None else np.asarray(x, float),
                               fun=float(np.dot(c, x)) if x is not None else None,
                               message=message, mip_gap=0.25)
    return run


def test_time_limit_uses_the_incumbent_and_says_so(monkeypatch):
    g = graph_of(chain_module(3))
    masks = [1, 2, 4, g.all_mask]
    monkeypatch.setattr(ilp_module, "milp", fake_milp(1, [1, 1, 1, 0]))
    result = solve_ilp(g, masks, [1.0, 1.0, 1.0, 1.0], 5.0, lambda: [g.all_mask])
    assert result.status == "time-limit" and "best incumbent" in result.message
    assert result.groups == [1, 2, 4] and result.mip_gap == 0.25


def test_failures_fall_back_to_greedy_and_say_so(monkeypatch):
    g = graph_of(chain_module(3))
    masks = [1, 2, 4, g.all_mask]
    monkeypatch.setattr(ilp_module, "milp", fake_milp(1, None))
    result = solve_ilp(g, masks, [1.0] * 4, 5.0, lambda: [g.all_mask])
    assert result.status == "fallback" and "without an incumbent" in result.message
    assert result.groups == [g.all_mask]

    def broken(*args, **kwargs):
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(ilp_module, "milp", broken)
    result = solve_ilp(g, masks, [1.0] * 4, 5.0, lambda: [g.all_mask])
    assert result.status == "fallback" and "HiGHS failed: RuntimeError: solver crashed" in result.message


def test_exhausted_time_limit_is_reported_by_the_planner():
    g, m = model_of(softmax_module())
    plan = plan_function(g, m, "ilp", time_limit=1e-9)
    assert plan.status == "fallback" and "greedy" in plan.message and "time-limit" in plan.message
    assert plan.groups == plan_function(g, m, "greedy").groups


# --- rule-based planners ------------------------------------------------------------------------


def reductions_are_tails(g: FusionGraph, groups: list[int]) -> bool:
    for m in groups:
        for i in bits(m):
            if g.nodes[i].mnemonic.startswith("reduce") and g.succ_mask[i] & m:
                return False
    return True


def test_xla_layernorm_and_softmax():
    g, m = model_of(layernorm_module())
    plan = plan_function(g, m, "xla")
    assert plan.kernels == 4  # FusionStitching counts 4 XLA kernels for LayerNorm
    assert reductions_are_tails(g, plan.groups)
    g, m = model_of(softmax_module())
    plan = plan_function(g, m, "xla")
    assert plan.kernels == 3 and reductions_are_tails(g, plan.groups)
    assert any(c.outputs.__len__() == 2 for c in plan.costs)  # exp leaves the reduce fusion too


def test_tvm_post_dominator_rule():
    g, m = model_of(layernorm_module())
    ipdom = post_dominators(g)
    last = len(g) - 1
    assert ipdom[last] == -1
    sub = next(i for i in range(len(g)) if g.nodes[i].mnemonic == "sub")
    assert g.nodes[ipdom[sub]].mnemonic == "mul" and ipdom[sub] > sub + 2  # past the variance
    plan = plan_function(g, m, "tvm")
    assert reductions_are_tails(g, plan.groups)
    assert plan.edge_reasons and any("kCommReduce" in d for _, d in plan.edge_reasons.values())


@pytest.mark.parametrize("planner", PLANNERS)
def test_every_planner_returns_a_valid_acyclic_partition(planner):
    g, m = model_of(layernorm_module())
    plan = plan_function(g, m, planner)
    assert sorted(i for mask in plan.groups for i in bits(mask)) == list(range(len(g)))
    assert find_kernel_cycle(g, plan.groups) is None
    assert all(check_pattern(g, m, mask, 64).ok for mask in plan.groups)
    assert plan.time_us == pytest.approx(sum(c.time_us for c in plan.costs))


def test_none_planner_is_unfused():
    g, m = model_of(layernorm_module())
    plan = plan_function(g, m, "none")
    assert plan.kernels == len(g)


# --- the pass: rewrite, options, report ---------------------------------------------------------


def fused(text_or_module, **options):
    module = parse_module(text_or_module) if isinstance(text_or_module, str) else text_or_module
    results = fuse_module(module, PlanOptions(**options), summary=False)
    module.verify()
    verify_located(module)
    return module, results


def groups_in(module) -> list[fusion.GroupOp]:
    return [op for op in module.walk() if isinstance(op, fusion.GroupOp)]


def test_rewrite_builds_verified_named_groups_with_attributes():
    module, _ = fused(softmax_module(8, 16))
    (group,) = groups_in(module)
    assert group.group_name.data == "fused_reduce_max_sub_exp_reduce_sum_div"
    assert group.kind.data == "stitch"
    stitch = [s.data for s in group.attributes["stitch"].data]
    assert len(stitch) == len(list(group.block.ops)) - 1
    assert stitch[0] == "shared" and stitch[-1] == "none"
    assert group.attributes["modeled_bytes"].value.data == 2 * 8 * 16 * 4
    assert group.attributes["modeled_time_us"].value.data > 0


MULTI_OUTPUT = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = graph.constant dense<2.0> : tensor<4x8xf32>
  %d = graph.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0]]> : tensor<4x8xf32>
  %e = graph.exp %x : tensor<4x8xf32>
  %m = graph.mul %e, %c : tensor<4x8xf32>
  %a = graph.add %m, %d : tensor<4x8xf32>
  func.return %e, %a : tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_multi_output_and_constants():
    module, _ = fused(MULTI_OUTPUT)
    (group,) = groups_in(module)
    assert len(group.results) == 2  # %e is used inside and returned
    names = [op.name for op in group.block.ops]
    assert names.count("graph.constant") == 1  # the splat is cloned in, the dense one is an input
    assert len(group.inputs) == 2
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 8)).astype(np.float32)
    for want, got in zip(reference(MULTI_OUTPUT)(x, w), reference(module)(x, w)):
        np.testing.assert_array_equal(want, got)


def test_groups_are_in_dependence_order_and_foreign_ops_stay():
    text = """
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, i32) {
  %e = graph.exp %x : tensor<4x8xf32>
  %k = arith.constant 3 : i32
  %n = graph.neg %e : tensor<4x8xf32>
  func.return %n, %k : tensor<4x8xf32>, i32
}
"""
    module, results = fused(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    names = [op.name for op in fn.body.block.ops]
    assert "arith.constant" in names and names.count("fusion.group") == 1
    assert len(results[0].plan.groups) == 2  # the arith op is a node of its own, never wrapped
    assert results[0].plan.kernels == 1  # ... and not a kernel


def test_no_fuse_keeps_an_op_alone():
    module, results = fused(softmax_module(8, 16), no_fuse=("exp",))
    groups = groups_in(module)
    singles = [g for g in groups if g.kind.data == "single"]
    assert [g.group_name.data for g in singles] == ["exp"]
    edges = results[0].report["edges"]
    assert any(e["reason"] == "no-fuse" for e in edges)


def test_no_fuse_by_value_name_and_errors():
    module = parse_module(MULTI_OUTPUT)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    assert resolve_no_fuse(module, ("%m",))[fn] == frozenset({3})
    assert resolve_no_fuse(module, ("graph.exp", "add"))[fn] == frozenset({2, 4})
    assert resolve_no_fuse(module, ("sqrt",))[fn] == frozenset()  # an op absent here
    with pytest.raises(Diagnostic, match="no-fuse entry '%zz' is neither a graph op name nor"):
        resolve_no_fuse(module, ("%zz",))


def test_invalid_options():
    for bad, words in ((dict(planner="fast"), "unknown planner"), (dict(target="tpu"), "unknown target"),
                       (dict(time_limit=0), "time-limit must be positive"),
                       (dict(max_group_size=0), "max-group-size"), (dict(top_k=0), "top-k"),
                       (dict(params={"bogus": 1.0}), "unknown cost-model parameter")):
        with pytest.raises(ValueError, match=words):
            PlanOptions(**bad).check()


CYCLE = """
func.func @main(%x: tensor<128x768xf32>, %w: tensor<768x768xf32>) -> tensor<128x768xf32> {
  %e = graph.exp %x : tensor<128x768xf32>
  %m = graph.matmul %e, %w : (tensor<128x768xf32>, tensor<768x768xf32>) -> tensor<128x768xf32>
  %a = graph.add %e, %m : tensor<128x768xf32>
  func.return %a : tensor<128x768xf32>
}
"""


def test_report_and_dot(tmp_path, capsys):
    report, dot = tmp_path / "r.json", tmp_path / "r.dot"
    module = parse_module(CYCLE)
    fuse_module(module, PlanOptions(), report=str(report), dot=str(dot))
    data = json.loads(report.read_text())
    (fn,) = data["functions"]
    assert fn["kernels"] == 3 and fn["status"] == "optimal" and data["target"] == "gpu"
    reasons = {(e["producer"], e["consumer"]): e["reason"] for e in fn["edges"]}
    assert reasons[(0, 2)] == "cycle"
    assert reasons[(0, 1)] == "op-class" and reasons[(1, 2)] == "op-class"
    assert fn["solver"]["candidates"] >= 3
    text = dot.read_text()
    assert text.startswith("digraph fusion") and text.count("subgraph cluster_fn0_k") == 3
    err = capsys.readouterr().err
    assert "fusion-plan @main: planner=ilp target=gpu: 3 ops -> 3 kernels" in err


def test_report_explains_resource_limits_and_cost(tmp_path):
    report = tmp_path / "r.json"
    module = chain_module(6)
    fuse_module(module, PlanOptions(params={"max_registers_per_thread": 24}), report=str(report),
                summary=False)
    (fn,) = json.loads(report.read_text())["functions"]
    split = [e for e in fn["edges"] if e["decision"] == "split"]
    assert split and all(e["reason"] == "resource-limit" and "registers per thread > limit 24" in e["detail"]
                         for e in split)
    assert any(e["decision"] == "fused" and e["stitch"] == "register" for e in fn["edges"])
    for group in groups_in(module):
        assert len(list(group.block.ops)) - 1 <= 4  # 16 + 2 * 4 registers


def test_multi_block_functions_are_a_diagnostic():
    text = """
func.func @main(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  %e = graph.exp %x : tensor<4xf32>
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  func.return %e : tensor<4xf32>
^bb2:
  func.return %x : tensor<4xf32>
}
"""
    with pytest.raises(Diagnostic, match="only single-block functions can be planned"):
        fuse_module(parse_module(text), PlanOptions(), summary=False)


def test_planning_twice_keeps_the_groups():
    module, _ = fused(softmax_module(8, 16))
    before = [g.group_name.data for g in groups_in(module)]
    again, results = fused(module)
    assert [g.group_name.data for g in groups_in(again)] == before
    assert results[0].plan.kernels == 1  # the existing group is one opaque kernel


def test_functions_without_graph_ops():
    text = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = graph.constant dense<1.0> : tensor<4xf32>
  func.return %x, %c : tensor<4xf32>, tensor<4xf32>
}
func.func private @decl(%x: tensor<4xf32>) -> tensor<4xf32>
"""
    module, results = fused(text)
    assert len(results) == 1 and results[0].plan.kernels == 0 and results[0].plan.status == "optimal"
    assert not groups_in(module)
