"""mlfuse's own thread pool: the team that runs a team call's chunks (home_blocks).

Generated code calls `mlfuse_parallel(fn, data, n)` where it called libgomp's
`GOMP_parallel`: `fn(data, t)` runs on the calling thread as t = 0 and on up to n - 1
of the pool's workers as t = 1, 2, ..., each claiming chunks of the call's range from
the schedule until none is left. The difference from libgomp is the end of a call.
libgomp's parallel region ends at a barrier that every thread of the team must reach,
so when the OS has descheduled a worker (another process holds its core) the caller
waits for it to be scheduled, start, find nothing to do, and arrive: beside a spinning
process U-Net's calls at 2 threads stalled 120-170 ms at that barrier in 13-18 calls of
every 4 s (a third of the time). Here a worker *joins* a call before it claims a chunk,
and the caller, once its own claims come back empty, closes the call and waits only for
the workers that joined. A worker that never got a core holds up nothing: the caller
and the workers that run take its home block (the schedule's stealing), and it finds
the call closed when it runs. A joined worker that is preempted still holds up the
chunk it runs, as before.

State (globals, each on its own cache line):

    gen       i32  the latest call's number; workers wait for it to change (a futex)
    entry     i64  (gen << 32) | CLOSED | joined: joins are compare-exchanges that name
                   the call, so a worker that slept through a call cannot join the next
    job_fn, job_data, job_threads   the call, written before `entry` and `gen`
    sleepers  i32  workers asleep on `gen`: the caller wakes them only when there are any
    busy      i32  a caller holds the pool; a second caller runs its call alone
    started   i32  workers started (lazily, up to the largest n - 1 asked for)
    caller_asleep  i32  the caller sleeps on it (a futex) until the last joined worker leaves
    crowded   i32  calls from several threads run (set_crowded): calls run alone, workers sleep

    mlfuse_parallel(fn, data, n):
        if n <= 1 or crowded or busy was taken: fn(data, 0); return
        start workers up to n - 1; publish the call (fields, entry, gen; wake sleepers)
        fn(data, 0)
        entry |= CLOSED; wait while entry's joined count is not 0 (spin CALLER_SPINS
        pauses, then sleep on caller_asleep)
        busy = 0
    worker k:
        loop: wait for gen != seen (spin WORKER_SPINS pauses, then sleep on the futex)
              seen = gen; join if entry names seen and is open; if k < job_threads:
              job_fn(job_data, k); leave (entry -= 1)

Workers spin a while before they sleep, as libgomp's do (GOMP_SPINCOUNT), so the next
team call of the same model call starts at once. The pool is compiled once (one small
module, its object in the disk cache), loaded once a process into an engine of its own,
and its functions are bound by name for every object that calls them (`register`). A forked child has no workers: `after_fork` empties the
pool (compiled code in a child runs on one thread in any case, see cpu.py).
"""

from __future__ import annotations

import ctypes
import functools
import platform

import llvmlite.binding as llvm
import llvmlite.ir as ir

from mlfuse.backend import stack

PARALLEL = "mlfuse_parallel"
AFTER_FORK = "mlfuse_pool_after_fork"
THREAD_NAME = "mlfuse-pool"
CROWDED = "mlfuse_pool_crowded"  # nonzero while calls run beside each other: workers do not spin

CLOSED = 1 << 31
JOINED = CLOSED - 1  # the joined workers' count, in entry's low 31 bits
# pauses a worker spins for a new call before it sleeps: 26 ns each on this host's Zen 4,
# so about 5 ms (libgomp's workers spin 300000 pauses, 7.8 ms here). Waking a sleeping
# worker costs a futex call and, on these VMs, the wake-up of an idle vCPU.
WORKER_SPINS = 200000
# pauses the caller spins for the workers that joined before it sleeps until the last
# leaves: a worker preempted mid-chunk may need the caller's core to finish it
CALLER_SPINS = 4000
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()
JOB_FN = ir.FunctionType(VOID, [PTR, I32])


class PoolModule:
    """The pool's LLVM IR, its globals and functions, with `linkage` (default: exported)."""

    def __init__(self, linkage: str = ""):
        self.mod = ir.Module("mlfuse_pool")
        self.linkage = linkage
        self.gen = self._global("mlfuse_pool_gen", I32)
        self.entry = self._global("mlfuse_pool_entry", I64)
        self.job_fn = self._global("mlfuse_pool_job_fn", PTR)
        self.job_data = self._global("mlfuse_pool_job_data", PTR)
        self.job_threads = self._global("mlfuse_pool_job_threads", I32)
        self.sleepers = self._global("mlfuse_pool_sleepers", I32)
        self.busy = self._global("mlfuse_pool_busy", I32)
        self.started = self._global("mlfuse_pool_started", I32)
        self.caller_asleep = self._global("mlfuse_pool_caller_asleep", I32)
        self.crowded = self._global(CROWDED, I32)
        self.libc = {
            name: ir.Function(self.mod, ir.FunctionType(ret, args, var_arg=var_arg), name)
            for name, ret, args, var_arg in (
                ("syscall", I64, [I64], True),
                ("pthread_create", I32, [PTR, PTR, PTR, PTR], False),
                ("pthread_attr_init", I32, [PTR], False),
                ("pthread_attr_setstacksize", I32, [PTR, I64], False),
                ("pthread_attr_setdetachstate", I32, [PTR, I32], False),
                ("pthread_attr_destroy", I32, [PTR], False),
                ("pthread_self", I64, [], False),
                ("pthread_setname_np", I32, [I64, PTR], False),
            )
        }
        self.pause = self._pause()
        self.worker = self._function("mlfuse_pool_worker", ir.FunctionType(PTR, [PTR]), "internal")
        self.start_workers = self._function("mlfuse_pool_start", ir.FunctionType(VOID, [I32]), "internal")
        # fn typed (it prints as `ptr` to LLVM): llvmlite calls only through typed pointers
        self.parallel = self._function(PARALLEL, ir.FunctionType(VOID, [ir.PointerType(JOB_FN), PTR, I32]), linkage)
        self.after_fork = self._function(AFTER_FORK, ir.FunctionType(VOID, []), linkage)
        self._define_worker()
        self._define_start_workers()
        self._define_parallel()
        self._define_after_fork()

    def _global(self, name: str, typ: ir.Type) -> ir.GlobalVariable:
        g = ir.GlobalVariable(self.mod, typ, name)
        g.initializer = ir.Constant(typ, None)  # pyright: ignore[reportAttributeAccessIssue]  (llvmlite's stub types it None)
        g.linkage = self.linkage
        g.align = 64  # pyright: ignore[reportAttributeAccessIssue]  (a line each: workers poll gen and entry)
        return g

    def _function(self, name: str, typ: ir.FunctionType, linkage: str) -> ir.Function:
        fn = ir.Function(self.mod, typ, name)
        fn.linkage = linkage
        return fn

    def _pause(self) -> ir.Function:
        """A spin-wait hint (x86's pause; nothing elsewhere)."""
        fn = self._function("mlfuse_pool_pause", ir.FunctionType(VOID, []), "internal")
        b = ir.IRBuilder(fn.append_basic_block())
        if platform.machine() in ("x86_64", "AMD64"):
            b.call(ir.Function(self.mod, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause"), [])
        b.ret_void()
        return fn

    def _name(self) -> ir.GlobalVariable:
        """The workers' thread name, as top and /proc/PID/task/TID/comm show it."""
        data = bytearray(THREAD_NAME.encode() + b"\0")
        name = ir.GlobalVariable(self.mod, ir.ArrayType(I8, len(data)), "mlfuse_pool_thread_name")
        name.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)  # pyright: ignore[reportAttributeAccessIssue]
        name.global_constant, name.linkage = True, "internal"
        return name

    def _futex(self, b: ir.IRBuilder, op: int, word, value) -> None:
        number = SYS_FUTEX.get(platform.machine(), 202)
        b.call(self.libc["syscall"], [I64(number), word, I32(op), value, ir.Constant(PTR, None)])

    def _load(self, b: ir.IRBuilder, g: ir.GlobalVariable, order: str = "acquire"):
        return b.load_atomic(g, order, _size(g.value_type), typ=g.value_type)

    def _store(self, b: ir.IRBuilder, value, g: ir.GlobalVariable, order: str = "release") -> None:
        b.store_atomic(value, g, order, _size(g.value_type))

    def _define_worker(self) -> None:
        """worker(arg): arg packs the worker's number k (low 8 bits) and the call number
        it starts after (the caller starts workers before it publishes its call)."""
        fn = self.worker
        blocks = {n: fn.append_basic_block(n) for n in ("entry", "wait", "spin", "sleep", "doze", "woke", "join", "try", "run", "work", "leave")}
        b = ir.IRBuilder(blocks["entry"])
        packed = b.ptrtoint(fn.args[0], I64)
        k = b.trunc(b.and_(packed, I64(0xFF)), I32)
        first_seen = b.trunc(b.lshr(packed, I64(8)), I32)
        b.call(self.libc["pthread_setname_np"], [b.call(self.libc["pthread_self"], []), self._name()])
        b.branch(blocks["wait"])

        b.position_at_end(blocks["wait"])  # wait for a call after `seen`
        seen = b.phi(I32, "seen")
        seen.add_incoming(first_seen, blocks["entry"])
        spins = b.phi(I32, "spins")
        spins.add_incoming(I32(0), blocks["entry"])
        gen = self._load(b, self.gen)
        b.cbranch(b.icmp_unsigned("!=", gen, seen), blocks["join"], blocks["spin"])

        self._worker_spin_or_sleep(b, blocks, seen, spins)
        self._worker_join(b, blocks, gen)
        self._worker_run(b, blocks, k)

        b.position_at_end(blocks["leave"])
        seen.add_incoming(gen, blocks["leave"])
        spins.add_incoming(I32(0), blocks["leave"])
        b.branch(blocks["wait"])

    def _worker_spin_or_sleep(self, b: ir.IRBuilder, blocks: dict[str, ir.Block], seen: ir.PhiInstr, spins: ir.PhiInstr) -> None:
        """No new call yet: pause and look again, WORKER_SPINS times (none while calls
        run crowded), then sleep on `gen` until the next call wakes the sleepers."""
        b.position_at_end(blocks["spin"])
        b.call(self.pause, [])
        more = b.add(spins, I32(1))
        seen.add_incoming(seen, blocks["spin"])
        spins.add_incoming(more, blocks["spin"])
        keep_spinning = b.icmp_unsigned("<", more, I32(WORKER_SPINS))
        alone = b.icmp_unsigned("==", self._load(b, self.crowded, "monotonic"), I32(0))
        b.cbranch(b.and_(keep_spinning, alone), blocks["wait"], blocks["sleep"])

        b.position_at_end(blocks["sleep"])  # counted among the sleepers before the last look
        b.atomic_rmw("add", self.sleepers, I32(1), "seq_cst")
        still = b.icmp_unsigned("==", self._load(b, self.gen, "seq_cst"), seen)
        b.cbranch(still, blocks["doze"], blocks["woke"])
        b.position_at_end(blocks["doze"])
        self._futex(b, FUTEX_WAIT_PRIVATE, self.gen, seen)  # returns at once if gen moved
        b.branch(blocks["woke"])
        b.position_at_end(blocks["woke"])
        b.atomic_rmw("sub", self.sleepers, I32(1), "seq_cst")
        seen.add_incoming(seen, blocks["woke"])
        spins.add_incoming(I32(0), blocks["woke"])
        b.branch(blocks["wait"])

    def _worker_join(self, b: ir.IRBuilder, blocks: dict[str, ir.Block], gen) -> None:
        """Call `gen` is out: join it (entry + 1) if entry still names it and is open."""
        b.position_at_end(blocks["join"])
        b.branch(blocks["try"])
        b.position_at_end(blocks["try"])
        entry = self._load(b, self.entry)
        ours = b.icmp_unsigned("==", b.trunc(b.lshr(entry, I64(32)), I32), gen)
        is_open = b.icmp_unsigned("==", b.and_(entry, I64(CLOSED)), I64(0))
        b.cbranch(b.and_(ours, is_open), blocks["run"], blocks["leave"])
        b.position_at_end(blocks["run"])
        joined = b.cmpxchg(self.entry, entry, b.add(entry, I64(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(joined, 1), blocks["work"], blocks["try"])

    def _worker_run(self, b: ir.IRBuilder, blocks: dict[str, ir.Block], k) -> None:
        """Joined: run the job as thread k (if the call has that many), leave, and wake
        the caller if it sleeps and this was the last worker out of the closed call."""
        fn = b.function
        b.position_at_end(blocks["work"])
        job_fn = b.load(self.job_fn, typ=ir.PointerType(JOB_FN))  # typed: llvmlite calls only through those
        job_data = b.load(self.job_data, typ=PTR)
        threads = b.load(self.job_threads, typ=I32)
        call, after = fn.append_basic_block("call"), fn.append_basic_block("after")
        b.cbranch(b.icmp_unsigned("<", k, threads), call, after)
        b.position_at_end(call)
        b.call(job_fn, [job_data, k])
        b.branch(after)
        b.position_at_end(after)
        left = b.atomic_rmw("sub", self.entry, I64(1), "seq_cst")
        last = b.icmp_unsigned("==", b.and_(left, I64(CLOSED | JOINED)), I64(CLOSED | 1))
        wake, woken = fn.append_basic_block("wake"), fn.append_basic_block("woken")
        b.cbranch(b.and_(last, b.icmp_unsigned("!=", self._load(b, self.caller_asleep, "seq_cst"), I32(0))), wake, blocks["leave"])
        b.position_at_end(wake)  # the last worker out of a closed call wakes its sleeping caller
        flag = b.cmpxchg(self.caller_asleep, I32(1), I32(0), "seq_cst", "monotonic")
        b.cbranch(b.extract_value(flag, 1), woken, blocks["leave"])
        b.position_at_end(woken)
        self._futex(b, FUTEX_WAKE_PRIVATE, self.caller_asleep, I32(1))
        b.branch(blocks["leave"])

    def _define_start_workers(self) -> None:
        """start(want): start workers started + 1 ... want, detached, with stacks of
        stack.HELPER_STACK (the kernels' stack buffers); stops at the first that cannot be started (the calls then run on
        fewer threads: the schedule hands a missing worker's block to the others)."""
        fn = self.start_workers
        (want,) = fn.args
        entry, loop, made, done = (fn.append_basic_block(n) for n in ("entry", "loop", "made", "done"))
        b = ir.IRBuilder(entry)
        attr = b.alloca(ir.ArrayType(I8, 128))  # pthread_attr_t: 56 bytes on x86-64 glibc, 64 on arm64
        attr.align = 16  # pyright: ignore[reportAttributeAccessIssue]  (llvmlite's stub types it None)
        thread = b.alloca(I64)
        b.call(self.libc["pthread_attr_init"], [attr])
        b.call(self.libc["pthread_attr_setstacksize"], [attr, I64(stack.HELPER_STACK)])
        b.call(self.libc["pthread_attr_setdetachstate"], [attr, I32(1)])  # PTHREAD_CREATE_DETACHED
        seen = b.zext(self._load(b, self.gen, "monotonic"), I64)
        first = b.add(self._load(b, self.started, "monotonic"), I32(1))
        b.branch(loop)
        b.position_at_end(loop)
        k = b.phi(I32, "k")
        k.add_incoming(first, entry)
        more = b.icmp_signed("<=", k, want)
        go = fn.append_basic_block("go")
        b.cbranch(more, go, done)
        b.position_at_end(go)
        arg = b.inttoptr(b.or_(b.zext(k, I64), b.shl(seen, I64(8))), PTR)
        rc = b.call(self.libc["pthread_create"], [thread, attr, self.worker, arg])
        b.cbranch(b.icmp_signed("==", rc, I32(0)), made, done)
        b.position_at_end(made)
        self._store(b, k, self.started)
        k.add_incoming(b.add(k, I32(1)), made)
        b.branch(loop)
        b.position_at_end(done)
        b.call(self.libc["pthread_attr_destroy"], [attr])
        b.ret_void()

    def _define_parallel(self) -> None:
        fn = self.parallel
        job_fn, data, n = fn.args
        names = ("entry", "lock", "alone", "locked", "grow", "publish", "wake", "run", "wait", "look", "sleep", "doze", "done")
        blocks = {name: fn.append_basic_block(name) for name in names}
        b = ir.IRBuilder(blocks["entry"])
        # alone: one thread asked for, or calls from other threads run beside this one (the
        # team's threads would take their cores), or another caller holds the pool
        crowded = b.icmp_unsigned("!=", self._load(b, self.crowded, "monotonic"), I32(0))
        b.cbranch(b.or_(b.icmp_signed("<=", n, I32(1)), crowded), blocks["alone"], blocks["lock"])
        b.position_at_end(blocks["lock"])
        taken = b.cmpxchg(self.busy, I32(0), I32(1), "acquire", "monotonic")
        b.cbranch(b.extract_value(taken, 1), blocks["locked"], blocks["alone"])
        b.position_at_end(blocks["alone"])
        b.call(job_fn, [data, I32(0)])
        b.ret_void()

        b.position_at_end(blocks["locked"])
        workers = b.sub(n, I32(1))
        b.cbranch(b.icmp_signed("<", self._load(b, self.started, "monotonic"), workers), blocks["grow"], blocks["publish"])
        b.position_at_end(blocks["grow"])
        b.call(self.start_workers, [workers])
        b.branch(blocks["publish"])

        self._publish(b, blocks, job_fn, data, n)

        b.position_at_end(blocks["run"])
        b.call(job_fn, [data, I32(0)])
        closed = b.atomic_rmw("or", self.entry, I64(CLOSED), "acq_rel")
        b.cbranch(self._none_joined(b, closed), blocks["done"], blocks["wait"])

        self._wait_for_joined(b, blocks)

        b.position_at_end(blocks["done"])
        self._store(b, I32(0), self.caller_asleep, "monotonic")
        self._store(b, I32(0), self.busy)
        b.ret_void()

    def _publish(self, b: ir.IRBuilder, blocks: dict[str, ir.Block], fn_ptr, data, n) -> None:
        """The call's fields, then entry (open, none joined) and gen, the number the
        workers wait on; the sleepers are woken only if there are any."""
        b.position_at_end(blocks["publish"])
        gen = b.add(self._load(b, self.gen, "monotonic"), I32(1))
        b.store(fn_ptr, self.job_fn)
        b.store(data, self.job_data)
        b.store(n, self.job_threads)
        self._store(b, b.shl(b.zext(gen, I64), I64(32)), self.entry)  # open, none joined
        self._store(b, gen, self.gen, "seq_cst")
        asleep = self._load(b, self.sleepers, "seq_cst")
        b.cbranch(b.icmp_unsigned("!=", asleep, I32(0)), blocks["wake"], blocks["run"])
        b.position_at_end(blocks["wake"])
        self._futex(b, FUTEX_WAKE_PRIVATE, self.gen, I32(2**31 - 1))
        b.branch(blocks["run"])

    def _wait_for_joined(self, b: ir.IRBuilder, blocks: dict[str, ir.Block]) -> None:
        """The call is closed: wait until the workers that joined have left, spinning
        CALLER_SPINS pauses, then asleep (the last worker out wakes the caller)."""
        b.position_at_end(blocks["wait"])  # for the workers that joined: spin, then sleep
        spins = b.phi(I32, "spins")
        spins.add_incoming(I32(0), blocks["run"])
        b.call(self.pause, [])
        after = b.add(spins, I32(1))
        spins.add_incoming(after, blocks["look"])
        b.cbranch(b.icmp_unsigned("<", after, I32(CALLER_SPINS)), blocks["look"], blocks["sleep"])
        b.position_at_end(blocks["look"])
        b.cbranch(self._none_joined(b, self._load(b, self.entry)), blocks["done"], blocks["wait"])

        b.position_at_end(blocks["sleep"])  # flagged before the last look; the last worker out wakes it
        self._store(b, I32(1), self.caller_asleep, "seq_cst")
        b.cbranch(self._none_joined(b, self._load(b, self.entry, "seq_cst")), blocks["done"], blocks["doze"])
        b.position_at_end(blocks["doze"])
        self._futex(b, FUTEX_WAIT_PRIVATE, self.caller_asleep, I32(1))  # at once if the flag was cleared
        b.branch(blocks["sleep"])

    def _none_joined(self, b: ir.IRBuilder, entry):
        return b.icmp_unsigned("==", b.and_(entry, I64(JOINED)), I64(0))

    def _define_after_fork(self) -> None:
        """In a forked child: no workers, no caller (the fork may have come mid-call)."""
        b = ir.IRBuilder(self.after_fork.append_basic_block())
        self._store(b, I32(0), self.started)
        self._store(b, I32(0), self.sleepers)
        self._store(b, I64(CLOSED), self.entry)
        self._store(b, I32(0), self.busy)
        b.ret_void()


def runtime_ir() -> str:
    """The pool's LLVM IR for a program that links mlfuse's object code ahead of time
    (embedding): `mlfuse_parallel` and its state linkonce_odr, so that where several
    objects each bring a copy the linker keeps one. Not for code that an execution
    engine may unload: the workers run the pool's code between calls (use `register`)."""
    return str(PoolModule("linkonce_odr").mod)


_engine: llvm.ExecutionEngine | None = None


@functools.cache
def register() -> None:
    """Compile the pool (once a process) and bind its functions' names for the objects
    that execution engines load later (llvm.add_symbol). The pool's engine is never
    freed: its workers run its code for as long as the process lives (a freed engine,
    at the interpreter's exit say, would pull the code from under them)."""
    global _engine
    from mlfuse.backend import cpu

    # through the disk cache, as every kernel: LLVM took 40 ms of each process's first
    # load of a cached model (ResNet-18's is 0.13-0.19 s), the cache 1-2 ms
    obj = cpu.compile_object(PoolModule().mod)
    _engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), cpu.new_target_machine())
    _engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    _engine.finalize_object()
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_engine))  # never freed, see above
    for name in (PARALLEL, AFTER_FORK):
        llvm.add_symbol(name, _engine.get_function_address(name))


def set_crowded(crowded: bool) -> None:
    """Tell the workers whether calls of compiled code run beside each other (from
    several Python threads; mlfuse.backend.team). Then a worker sleeps as soon as it
    finds no call rather than spin: a spinning worker took a core from the other
    caller's one-thread call (U-Net, two Python threads each calling once: 33.5 ms
    against 23.3 ms on libgomp's team, which stops spinning when it has more threads
    than cores; 23.8 ms with workers that do not spin)."""
    if _engine is not None:
        _crowded_flag().value = int(crowded)


@functools.cache
def _crowded_flag() -> ctypes.c_int32:
    assert _engine is not None
    return ctypes.c_int32.from_address(_engine.get_global_value_address(CROWDED))


def after_fork() -> None:
    """Empty the pool in a forked child (its workers did not survive the fork)."""
    if _engine is not None:
        ctypes.CFUNCTYPE(None)(_engine.get_function_address(AFTER_FORK))()


def _size(typ: ir.Type) -> int:
    return 4 if typ == I32 else 8
