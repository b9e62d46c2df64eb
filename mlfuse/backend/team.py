"""How many threads each call of a compiled function runs on: the full team, or one.

libgomp ends every parallel region at a barrier that waits for each thread of the
team. When another process holds one of the cores, a team thread that is not
running holds up every region of the call for a scheduler time slice: ResNet-18
(32x32, 2 threads, with a test suite running beside it) took 300 ms a call, against
3 ms on one thread and 12 ms for onnxruntime. One thread never waits for another.

So each compiled function keeps the times of its recent calls with the full team
and with one thread, runs one thread only when its median is clearly (`ONE_THREAD_MARGIN`) faster, and tries the other choice every
`PROBE_EVERY`th call to follow the machine's load. On a quiet machine the full team
wins and one call in `PROBE_EVERY` runs on one thread. Results do not depend on the
choice: team calls split only independent iterations (see llvm_runtime).

A call that starts while another call of compiled code runs in this process (calls
from several Python threads) runs on one thread: libgomp gives each calling thread a
team of its own, and two teams of two on two cores wait at each other's barriers.
Such a call's time says nothing about a lone call's, so it is not recorded, nor is
a lone call's that another call overlapped. Nor is a call that took page faults
(fresh outputs from np.empty: the allocator's time, not the team's): recorded, they
had the sizer run LayerNorm at 65536x1024 on one thread (25-31 ms, against 13.5 on
the team) after calls into fresh arrays took 41-124 ms.
"""

from __future__ import annotations

import resource
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from mlfuse.backend import cpu

PROBE_EVERY = 32
WINDOW = 5  # calls per choice whose median decides
# One thread must beat the team by this factor: on a quiet machine noise alone must not
# move a memory-bound kernel onto one thread (a stalled team is 2-100x slower).
ONE_THREAD_MARGIN = 0.7
# A call with more minor page faults than this (in the whole process) is not recorded.
FAULTS_IGNORED = 64


class _Calls:
    """The calls of compiled code running in this process, and how many have started."""

    lock = threading.Lock()
    running = 0
    started = 0

    @classmethod
    def enter(cls) -> tuple[bool, int]:
        """(another call is running, this call's number)"""
        with cls.lock:
            cls.running += 1
            cls.started += 1
            return cls.running > 1, cls.started

    @classmethod
    def leave(cls, number: int) -> bool:
        """Did the call numbered `number` run alone to its end (no call started since)?"""
        with cls.lock:
            cls.running -= 1
            return cls.started == number


class TeamSizer:
    """The thread count of one compiled function's calls, chosen by their times.

    Calls may come from several threads at once: the sample windows are deques
    (appends are atomic) and a lost update of the counter only moves a probe."""

    def __init__(self) -> None:
        self.times: dict[int, deque[float]] = {}
        # each window's median, kept by record: choose runs on every call of a small model
        # too, where two medians a call were a tenth of the runtime's own overhead
        self.medians: dict[int, float] = {}
        self.calls = 0
        self.warmed: set[int] = set()  # team sizes whose first (cold) call has run

    def choose(self, team: int) -> int:
        if team <= 1:
            return 1
        self.calls += 1
        one, full = self.medians.get(1), self.medians.get(team)
        if full is None:
            return team
        if one is None:
            return 1
        best, other = (1, team) if one < ONE_THREAD_MARGIN * full else (team, 1)
        return other if self.calls % PROBE_EVERY == 0 else best

    def record(self, threads: int, seconds: float) -> None:
        window = self.times.setdefault(threads, deque(maxlen=WINDOW))
        window.append(seconds)
        if len(window) >= 2:
            self.medians[threads] = statistics.median(window)

    def call(self, fn: Callable[..., object], args: Sequence[int]) -> None:
        """Run `fn(*args)` on the chosen number of threads (one beside another call), and
        time it if it ran alone and without page faults."""
        crowded, number = _Calls.enter()
        try:
            threads = 1 if crowded else self.choose(cpu.team_size())
            cpu.use_threads(threads)
            faults = page_faults()
            start = time.perf_counter()
            fn(*args)
            seconds = time.perf_counter() - start
            faults = page_faults() - faults
        finally:
            alone = _Calls.leave(number) and not crowded
        if not alone or faults > FAULTS_IGNORED:
            return
        if threads in self.warmed:
            self.record(threads, seconds)
        else:  # page faults and the team's start: a first call would decide for a long time
            self.warmed.add(threads)


def page_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
