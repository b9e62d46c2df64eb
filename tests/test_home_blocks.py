"""The thread team's schedule (mlfuse/backend/home_blocks.py), compiled by LLVM and
driven one claim at a time: a hypothesis-chosen interleaving of threads stands for the
order in which the team's threads reach their claims (each claim is one atomic
compare-exchange, so any run of the real team is such an interleaving).

What every interleaving must give: each iteration of the range exactly once; chunks of
at least `grain` (or what is left of a block); each thread's own block from its front,
in order; and the whole range to one thread when the others never arrive (a team
smaller than asked for, or threads the OS descheduled).
"""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlfuse.backend import cpu, home_blocks

I32, I64, I8 = ir.IntType(32), ir.IntType(64), ir.IntType(8)
PTR = ir.PointerType()


class Schedule:
    """The schedule's two functions, JIT-compiled; a claim names the thread that makes it."""

    def __init__(self) -> None:
        mod = ir.Module("home_blocks_test")
        init = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64]), home_blocks.INIT)
        claim = ir.Function(mod, ir.FunctionType(I8, [PTR, PTR, PTR, I32]), home_blocks.CLAIM)
        for name, inner in (("init", init), ("claim", claim)):  # exported: the schedule's own are internal
            outer = ir.Function(mod, inner.function_type, name)
            b = ir.IRBuilder(outer.append_basic_block())
            result = b.call(inner, outer.args)
            b.ret_void() if isinstance(inner.function_type.return_type, ir.VoidType) else b.ret(result)
        home_blocks.define_home_blocks(mod)
        # an engine of its own target machine: an execution engine owns (and frees) the one it
        # is given, and cpu.target_machine() is shared by every compilation
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), cpu.new_target_machine())
        self.engine.finalize_object()
        address = self.engine.get_function_address
        self.init = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(address("init"))
        self.claim_fn = ctypes.CFUNCTYPE(ctypes.c_int8, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(address("claim"))
        self.state = (ctypes.c_int64 * home_blocks.state_words(64))()

    def start(self, threads: int, trip: int, grain: int) -> None:
        self.init(ctypes.addressof(self.state), threads, trip, grain)

    def claim(self, thread: int) -> tuple[int, int] | None:
        lo, hi = ctypes.c_int64(-1), ctypes.c_int64(-1)
        if self.claim_fn(ctypes.addressof(self.state), ctypes.addressof(lo), ctypes.addressof(hi), thread):
            return lo.value, hi.value
        return None


@pytest.fixture(scope="module")
def schedule() -> Schedule:
    return Schedule()


def home(threads: int, trip: int, t: int) -> range:
    return range(t * trip // threads, (t + 1) * trip // threads)


def run(schedule: Schedule, threads: int, trip: int, grain: int, order: list[int]) -> dict[int, list[tuple[int, int]]]:
    """Each thread's chunks when threads claim in `order` (then round-robin) until every
    thread that claims has been told there is nothing left."""
    schedule.start(threads, trip, grain)
    chunks: dict[int, list[tuple[int, int]]] = {t: [] for t in range(threads)}
    done: set[int] = set()
    present = sorted(set(order)) or [0]
    queue = list(order) + present * (trip + threads)
    for t in queue:
        if t in done:
            continue
        got = schedule.claim(t)
        if got is None:
            done.add(t)
        else:
            chunks[t].append(got)
        if done == set(present):
            break
    assert done == set(present), "a thread was still handed chunks after the range ran out"
    return chunks


def check_cover(chunks: dict[int, list[tuple[int, int]]], trip: int) -> None:
    covered = sorted(i for cs in chunks.values() for lo, hi in cs for i in range(lo, hi))
    assert covered == list(range(trip)), "every iteration exactly once"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data(), st.integers(1, 8), st.integers(1, 300), st.integers(1, 9))
def test_every_interleaving_runs_each_iteration_once(schedule, data, threads, trip, grain):
    order = data.draw(st.lists(st.integers(0, threads - 1), max_size=60), label="order")
    chunks = run(schedule, threads, trip, grain, order)
    check_cover(chunks, trip)
    for t, cs in chunks.items():
        block = home(threads, trip, t)
        own = [(lo, hi) for lo, hi in cs if lo in block]
        assert [lo for lo, _ in own] == sorted(lo for lo, _ in own), "a block's owner takes it front to back"
        if own:
            assert own[0][0] == block.start, "the owner starts at its block's front"
        for lo, hi in cs:
            owner = next(v for v in range(threads) if lo in home(threads, trip, v))
            assert hi <= home(threads, trip, owner).stop, "a chunk stays within one block"
            assert hi - lo >= 1


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(2, 8), st.integers(1, 300), st.integers(1, 9))
def test_one_thread_runs_everything_when_the_others_never_come(schedule, threads, trip, grain):
    chunks = run(schedule, threads, trip, grain, [0])
    check_cover(chunks, trip)
    assert all(not cs for t, cs in chunks.items() if t != 0)


def test_chunks_shrink_to_grain_and_thieves_take_the_back(schedule):
    """Thread 0 alone on [0, 64) with grain 2 at 2 threads: its own block [0, 32) in halves
    of what remains (16, 8, 4, 2, 2), then thread 1's [32, 64) from the back."""
    chunks = run(schedule, 2, 64, 2, [0])
    assert chunks[0][:5] == [(0, 16), (16, 24), (24, 28), (28, 30), (30, 32)]
    assert chunks[0][5:] == [(48, 64), (40, 48), (36, 40), (34, 36), (32, 34)]


def test_owner_keeps_the_front_while_a_thief_takes_the_back(schedule):
    schedule.start(2, 100, 1)
    assert schedule.claim(1) == (50, 75)  # thread 1's block is [50, 100): half of it
    assert schedule.claim(0) == (0, 25)
    assert schedule.claim(0) == (25, 38)
    assert schedule.claim(0) == (38, 44)
    assert schedule.claim(1) == (75, 88), "thread 1 goes on at the front of what is left of its block"
    assert [schedule.claim(0) for _ in range(3)] == [(44, 47), (47, 49), (49, 50)]
    assert schedule.claim(0) == (94, 100), "thread 0, done with its block, takes the back half of [88, 100)"
    assert schedule.claim(1) == (88, 91)
    assert schedule.claim(0) == (92, 94), "the back half of [91, 94), rounded up"
    assert [schedule.claim(1), schedule.claim(1), schedule.claim(0)] == [(91, 92), None, None]


def test_init_stays_a_call_under_o3():
    """mlfuse_team_init is not inlined into its callers: O3 had unrolled its loop at each
    team call for the call's constant trip, and an entry function of 55 team calls
    (MobileNetV2's) took LLVM 0.7 s more."""
    mod = ir.Module("team_calls")
    init = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64]), home_blocks.INIT)
    caller = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64]), "entry")
    b = ir.IRBuilder(caller.append_basic_block())
    for trip in (224, 112, 56):
        b.call(init, [caller.args[0], caller.args[1], I64(trip), I64(4)])
    b.ret_void()
    home_blocks.define_home_blocks(mod)
    optimized = str(cpu.optimized_module(str(mod), cpu.new_target_machine())[1])
    entry = optimized[optimized.index('@entry('):]
    assert entry.count(f"@{home_blocks.INIT}(") == 3, entry
