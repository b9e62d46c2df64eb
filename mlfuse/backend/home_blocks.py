"""The thread team's schedule: each thread works through its own block of a team
call's range from the front, and a thread whose block is done takes chunks from the
back of the others'.

convert-to-llvm (mlfuse/conversion/llvm_runtime.py) declares two functions and
calls them around `mlfuse_parallel` (the pool, mlfuse/backend/pool.py); `define_home_blocks` gives them their bodies in
the llvmlite module, where LLVM's atomics are at hand (xDSL's `llvm` dialect has no
`cmpxchg`):

    void mlfuse_team_init(i64* state, i64 threads, i64 trip, i64 grain)
        line 0: threads, grain; line 1 + t: block t's [next, end) packed in one i64
        (next in the low 32 bits, end in the high), one 64-byte line each;
        thread t's home block is [t * trip / threads, (t + 1) * trip / threads)
    i8 mlfuse_team_claim(i64* state, i64* lo, i64* hi, i32 thread)
        t = thread mod threads; for v = t, t + 1, ... (mod threads):
          while block v is not empty:
            size = max(grain, ceil((end - next) / SHARE)), at most end - next
            v == t: cmpxchg [next, end) -> [next + size, end), the chunk [next, next + size)
            v != t: cmpxchg [next, end) -> [next, end - size),  the chunk [end - size, end)
            on success return 1 (else look again)
        return 0

Why home blocks rather than libgomp's guided schedule: a chain of kernels over one
image splits it the same way in each kernel, so each thread reads the rows it wrote
in the kernel before from its own core's caches. Guided hands its first, largest
chunk (half the range at 2 threads) to whichever thread arrives first, so a thread
read half its input from the other core's caches about every other kernel (the two
vCPUs of this host may sit on different core complexes). A plain static split had
U-Net at 0.89x, ResNet-18 0.93x and MobileNetV2 0.94x guided's time at 2 threads
(loop means, side by side), but it waits for a thread that the OS descheduled: here a
thread whose block is done takes chunks from the back of the others', so a stalled
thread holds up at most the chunk it runs, and the owner keeps the front of its block
in order. Chunks shrink as a block empties (1/SHARE of what remains), so the last
ones are `grain` wide, as guided's are. A range of 2^31 or more iterations does not
fit the packed word: emit_team_call runs it on one thread.
"""

from __future__ import annotations

import llvmlite.ir as ir

INIT = "mlfuse_team_init"
CLAIM = "mlfuse_team_claim"
LINE_WORDS = 8  # i64 words per 64-byte cache line: each block's counter on a line of its own
SHARE = 2  # a claim takes this fraction of what remains of a block (or `grain`, if more)
MAX_TRIP = 2**31 - 1  # [next, end) packed as two 32-bit halves

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)


def state_words(max_threads: int) -> int:
    """i64 words of a team call's state for up to `max_threads` threads."""
    return LINE_WORDS * (max_threads + 1)


def define_home_blocks(mod: ir.Module) -> None:
    """Give the team schedule's functions that `mod` declares their bodies (internal:
    each unit that calls them holds a copy, see mlfuse.backend.kernels)."""
    for name, define in ((INIT, _define_init), (CLAIM, _define_claim)):
        fn = mod.globals.get(name)
        if isinstance(fn, ir.Function) and fn.is_declaration:
            fn.linkage = "internal"
            define(mod, fn)


def _word(b: ir.IRBuilder, state, line, word: int):
    index = b.add(b.mul(line, I64(LINE_WORDS)), I64(word))
    return b.gep(state, [index], inbounds=True, source_etype=I64)


def _define_init(mod: ir.Module, fn: ir.Function) -> None:
    state, threads, trip, grain = fn.args
    # Inlined, O3 unrolled this loop at every team call for the call's constant trip:
    # MobileNetV2's entry function, with 55 team calls, took LLVM 0.7 s, and 0.09 s with
    # the calls kept. One call per team call costs nothing beside the team's start.
    fn.attributes.add("noinline")
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.store(threads, _word(b, state, I64(0), 0))
    b.store(grain, _word(b, state, I64(0), 1))
    b.branch(loop)
    b.position_at_end(loop)
    t = b.phi(I64)
    t.add_incoming(I64(0), entry)
    line = b.add(t, I64(1))
    first, end = b.sdiv(b.mul(t, trip), threads), b.sdiv(b.mul(line, trip), threads)
    b.store(_pack(b, first, end), _word(b, state, line, 0))
    t.add_incoming(line, loop)
    b.cbranch(b.icmp_signed("<", line, threads), loop, done)
    b.position_at_end(done)
    b.ret_void()


def _pack(b: ir.IRBuilder, first, end):
    return b.or_(first, b.shl(end, I64(32)))


def _define_claim(mod: ir.Module, fn: ir.Function) -> None:
    state, lo, hi, thread = fn.args
    blocks = {n: fn.append_basic_block(n) for n in ("entry", "victim", "try", "claim", "got", "next", "none")}
    b = ir.IRBuilder(blocks["entry"])
    threads = b.load(_word(b, state, I64(0), 0), typ=I64)
    grain = b.load(_word(b, state, I64(0), 1), typ=I64)
    me = b.urem(b.zext(thread, I64), threads)  # a team larger than asked for shares blocks
    b.branch(blocks["victim"])

    b.position_at_end(blocks["victim"])  # k: how many blocks after ours
    k = b.phi(I64)
    k.add_incoming(I64(0), blocks["entry"])
    word = _word(b, state, b.add(b.urem(b.add(me, k), threads), I64(1)), 0)
    own = b.icmp_signed("==", k, I64(0))
    b.branch(blocks["try"])

    b.position_at_end(blocks["try"])
    packed = b.load_atomic(word, "monotonic", 8, typ=I64)
    first, end = b.and_(packed, I64(0xFFFFFFFF)), b.lshr(packed, I64(32))
    b.cbranch(b.icmp_signed("<", first, end), blocks["claim"], blocks["next"])

    b.position_at_end(blocks["claim"])
    remaining = b.sub(end, first)
    share = b.sdiv(b.add(remaining, I64(SHARE - 1)), I64(SHARE))
    size = b.select(b.icmp_signed(">", share, grain), share, grain)
    size = b.select(b.icmp_signed("<", size, remaining), size, remaining)
    chunk_lo = b.select(own, first, b.sub(end, size))  # the owner takes the front, others the back
    left = b.select(own, _pack(b, b.add(first, size), end), _pack(b, first, b.sub(end, size)))
    taken = b.cmpxchg(word, packed, left, "monotonic", "monotonic")
    b.cbranch(b.extract_value(taken, 1), blocks["got"], blocks["try"])  # lost a race: look again

    b.position_at_end(blocks["got"])
    b.store(chunk_lo, lo)
    b.store(b.add(chunk_lo, size), hi)
    b.ret(I8(1))

    b.position_at_end(blocks["next"])
    k_next = b.add(k, I64(1))
    k.add_incoming(k_next, blocks["next"])
    b.cbranch(b.icmp_signed("<", k_next, threads), blocks["victim"], blocks["none"])

    b.position_at_end(blocks["none"])
    b.ret(I8(0))
