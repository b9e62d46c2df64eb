"""mlfuse's thread pool (mlfuse/backend/pool.py), driven through `mlfuse_parallel` with a
job of its own: every thread of a call takes iterations from a shared counter, counts
each one it runs, and marks which thread ran it.

What every call must give: each iteration exactly once, no thread still in the job when
the call returns, only threads 0 .. n - 1; and the call must not wait for a worker that
cannot run (the point of the pool, against libgomp's barrier).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from mlfuse.backend import cpu, pool

I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
NEXT, TRIP, COUNTS, WHO, IN_FLIGHT = range(5)  # the job's i64 words


class Job:
    """The test job and a signal handler that holds a thread until released, JIT-compiled."""

    def __init__(self) -> None:
        pool.register()
        mod = ir.Module("pool_test")
        self._define_job(mod)
        self._define_hold(mod)
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), cpu.new_target_machine())
        self.engine.finalize_object()
        self.job = self.engine.get_function_address("job")
        self.hold = self.engine.get_function_address("hold")
        self.released = ctypes.c_int32.from_address(self.engine.get_global_value_address("released"))
        self.held = ctypes.c_int32.from_address(self.engine.get_global_value_address("held"))
        self.parallel = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)(
            llvm.address_of_symbol(pool.PARALLEL))

    @staticmethod
    def _define_job(mod: ir.Module) -> None:
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I32]), "job")
        data, t = fn.args
        entry, loop, body, done = (fn.append_basic_block(n) for n in ("entry", "loop", "body", "done"))
        b = ir.IRBuilder(entry)

        def word(k: int):
            return b.gep(data, [I64(k)], source_etype=I64)

        b.atomic_rmw("add", word(IN_FLIGHT), I64(1), "seq_cst")
        trip = b.load(word(TRIP), typ=I64)
        counts = b.inttoptr(b.load(word(COUNTS), typ=I64), PTR)
        who = b.inttoptr(b.load(word(WHO), typ=I64), PTR)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.atomic_rmw("add", word(NEXT), I64(1), "seq_cst")
        b.cbranch(b.icmp_signed("<", i, trip), body, done)
        b.position_at_end(body)
        b.atomic_rmw("add", b.gep(counts, [i], source_etype=I32), I32(1), "seq_cst")
        b.store(t, b.gep(who, [i], source_etype=I32))
        b.branch(loop)
        b.position_at_end(done)
        b.atomic_rmw("sub", word(IN_FLIGHT), I64(1), "seq_cst")
        b.ret_void()

    @staticmethod
    def _define_hold(mod: ir.Module) -> None:
        """hold(sig): a signal handler that counts itself in `held`, then spins until
        `released` is set: the thread it runs on is there but cannot take part."""
        flags = {}
        for name in ("released", "held"):
            flags[name] = ir.GlobalVariable(mod, I32, name)
            flags[name].initializer = I32(0)
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I32]), "hold")
        entry, spin, done = (fn.append_basic_block(n) for n in ("entry", "spin", "done"))
        b = ir.IRBuilder(entry)
        b.atomic_rmw("add", flags["held"], I32(1), "seq_cst")
        b.branch(spin)
        b.position_at_end(spin)
        released = b.load_atomic(flags["released"], "seq_cst", 4, typ=I32)
        b.cbranch(b.icmp_unsigned("!=", released, I32(0)), done, spin)
        b.position_at_end(done)
        b.ret_void()

    def run(self, threads: int, trip: int) -> tuple[np.ndarray, np.ndarray, int]:
        """One call on `threads`: each iteration's count, the thread that ran it, and how
        many threads were still in the job when the call returned."""
        counts = np.zeros(trip, np.int32)
        who = np.full(trip, -1, np.int32)
        data = (ctypes.c_int64 * 5)(0, trip, counts.ctypes.data, who.ctypes.data, 0)
        self.parallel(self.job, ctypes.addressof(data), threads)
        return counts, who, data[IN_FLIGHT]


@pytest.fixture(scope="module")
def job() -> Job:
    return Job()


def check(counts: np.ndarray, who: np.ndarray, in_flight: int, threads: int) -> None:
    assert in_flight == 0, "a thread was still in the job when the call returned"
    assert (counts == 1).all(), f"iterations run {sorted(set(counts.tolist()))} times"
    assert who.min() >= 0 and who.max() < threads


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_each_iteration_once_and_no_thread_left(job: Job, threads: int) -> None:
    for trip in (1, 7, 1000, 20000) * 25:
        check(*job.run(threads, trip), threads)


def test_workers_take_part(job: Job) -> None:
    """Over many calls the workers run iterations too (the caller does not do it all)."""
    ran = set()
    for _ in range(200):
        ran |= set(job.run(2, 50000)[1].tolist())
    assert ran == {0, 1}


def test_one_thread_and_crowded_calls_run_on_the_caller(job: Job) -> None:
    counts, who, in_flight = job.run(1, 5000)
    check(counts, who, in_flight, 1)
    pool.set_crowded(True)
    try:
        for _ in range(20):
            counts, who, in_flight = job.run(4, 5000)
            check(counts, who, in_flight, 1)
    finally:
        pool.set_crowded(False)


def test_calls_from_several_threads(job: Job) -> None:
    """One caller holds the pool at a time; the others run their calls alone."""
    failures: list[str] = []

    def caller() -> None:
        for _ in range(100):
            counts, who, in_flight = job.run(3, 3000)
            if in_flight or not (counts == 1).all() or who.max() > 2:
                failures.append(f"in flight {in_flight}, counts {sorted(set(counts.tolist()))}")

    threads = [threading.Thread(target=caller) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not failures


def worker_threads() -> list[int]:
    tasks = Path("/proc/self/task")
    return [int(t.name) for t in tasks.iterdir() if (t / "comm").read_text().strip() == pool.THREAD_NAME]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="tgkill's syscall number is x86-64's")
def test_a_worker_that_cannot_run_holds_up_nothing(job: Job) -> None:
    """Every worker is held in a signal handler (there, but not running the pool's loop):
    calls finish on the caller alone, and the workers come back once released."""
    job.run(4, 100)  # three workers at least
    tids = worker_threads()
    assert len(tids) >= 3
    job.released.value, job.held.value = 0, 0
    before = signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal(signal.SIGUSR2, job.hold)
    results: list[tuple[np.ndarray, np.ndarray, int]] = []
    calls = threading.Thread(target=lambda: results.extend(job.run(4, 2000) for _ in range(50)))
    finished = False
    try:
        for tid in tids:
            libc.syscall(234, os.getpid(), tid, signal.SIGUSR2)  # tgkill: this thread alone
        deadline = time.monotonic() + 10
        while job.held.value < len(tids) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert job.held.value == len(tids)
        calls.start()
        calls.join(timeout=10)  # waiting for the held workers would never end: release them below
        finished = not calls.is_alive()
    finally:
        job.released.value = 1
        signal.signal(signal.SIGUSR2, before)
    if calls.ident is not None:
        calls.join()
    assert finished, "team calls waited for workers that could not run"
    for counts, who, in_flight in results:
        check(counts, who, in_flight, 1)  # the caller ran every iteration
    ran = set()
    for _ in range(200):
        counts, who, in_flight = job.run(2, 50000)
        check(counts, who, in_flight, 2)
        ran |= set(who.tolist())
    assert ran == {0, 1}


def test_forked_child_runs_team_calls(job: Job) -> None:
    """The workers do not survive fork; a child's calls run (on whatever threads it has)
    and return."""
    job.run(2, 100)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if every call was right
        code = 1
        try:
            results = [job.run(2, 5000) for _ in range(20)]
            code = 0 if all(in_flight == 0 and (counts == 1).all() for counts, _, in_flight in results) else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("a forked child's team call hung")


def test_runtime_ir_for_programs_that_link_objects() -> None:
    """runtime_ir defines the pool linkonce_odr (several objects may bring a copy) and
    verifies as a module of its own."""
    text = pool.runtime_ir()
    mod = llvm.parse_assembly(text)
    mod.verify()
    parallel = mod.get_function(pool.PARALLEL)
    assert not parallel.is_declaration and parallel.linkage == llvm.Linkage.linkonce_odr
