"""How many threads each call of a compiled function runs on: the full team, or one.

When another process holds one of the cores, a team is slower than its quiet self,
and may be slower than one thread: with libgomp's team, which ended every parallel
region at a barrier that waited for each thread, ResNet-18 (32x32, 2 threads, with a
test suite running beside it) took 300 ms a call, against 3 ms on one thread and 12 ms
for onnxruntime. mlfuse's pool (pool.py) waits only for the workers that joined a
call, but a joined worker that is preempted still holds up the chunk it runs, and a
worker that does not run leaves the caller its share. One thread never waits for another.

So each compiled function keeps the times of its recent calls with the full team
and with one thread, runs one thread only when its mean is clearly (`ONE_THREAD_MARGIN`)
faster, and probes the other choice to follow the machine's load: `FIRST_PROBE` calls
after the choice changes, then at doubling gaps up to every `PROBE_EVERY`th call, and
no more often than lets probes cost `PROBE_BUDGET` of the time (a stalling team's
probe is dear; see `window_mean` for why means). A
probe's time replaces the probed choice's window, whose samples are from before the
switch: load that has passed (another runtime's threads spinning after its call, a
neighbour's burst) must not keep the team off for long. A probe of the team is two
timed calls (after one that wakes the team, see below), and both must be fast to bring it back, so that on a busy core a lucky call
does not (the team then stalls at every barrier). With a fixed probe every 32nd
call into a window of 5, three good probes (96 calls) were needed to return to the
team: an encoder layer timed right after onnxruntime's calls ran on one thread for
whole turns of the models bench (3.9 ms against 2.5 ms). Once on one thread, the team
comes back only when clearly (`TEAM_MARGIN`) faster: with fresh windows and a single
margin, a team a little slower than one thread on a busy core won each probe and
stalled the calls after it (encoder layer at 2 threads, one core taken by a spinning
process, median call 5.6 ms against 4.4 with stale windows; with the hysteresis
4.5-4.6 ms, 1.2-1.8x its quiet time). That margin is for a busy core, which shows in
the probe itself: a neighbour preempts a team thread in nearly every call. A probe
whose timed calls were preempted less often than a quiet process is (`QUIET_PREEMPTIONS_PER_S`)
brings the team back by the lenient `TEAM_MARGIN_UNDISTURBED`: in the host's slow state
the team gains only a few percent, and onnxruntime's pool, spinning for up to 80 ms after
its calls, had sent MobileNetV2 to one thread, where the strict margin kept it for
seconds. A rate, not "none at all": a quiet process's long calls are preempted now and
then (RMSNorm at 65536x1024, 10 ms team calls: 0.03 a millisecond, a third of the calls
at least once), a neighbour on a core preempts it six times as often (0.17-0.20). On a
quiet machine the full team wins and one call in `PROBE_EVERY` runs on one thread.
Results do not depend on the choice: team calls split only independent iterations
(see llvm_runtime).

A call that starts while another call of compiled code runs in this process (calls
from several Python threads) runs on one thread, and tells the pool (set_crowded) to
run the other call's team calls alone too: the team's threads would take the cores
the callers run on.
Such a call's time says nothing about a lone call's, so it is not recorded, nor is
a lone call's that another call overlapped. Nor is the team's first call after a call
on one thread: the team's other threads slept through it, and waking them is the
probe's doing, not the team's speed. On these 2-vCPU VMs the wake-up took up to a host
scheduler tick when the host was busy (GPT-2 at 2 threads: 6.8 ms for that call against
2.9 ms for the next), so a probe of one thread made the team look slow at its next
probe, and the sizer kept the model on one thread for seconds (4.1 ms a call where the
team took 2.2-2.9). A probe of the team is therefore three calls: the first wakes the
threads, the other two decide. Nor is a call that took page faults
(fresh outputs from np.empty: the allocator's time, not the team's): recorded, they
had the sizer run LayerNorm at 65536x1024 on one thread (25-31 ms, against 13.5 on
the team) after calls into fresh arrays took 41-124 ms.
"""

from __future__ import annotations

import resource
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from mlfuse.backend import cpu, pool
from mlfuse.backend.stack import call_with_stack

PROBE_EVERY = 32
FIRST_PROBE = 2  # calls after the choice changes before the other is probed; the gap doubles to PROBE_EVERY
# A probe of the team is three calls, the last two timed: on a busy core one lucky call must
# not bring back a team that stalls (a single one-thread call is a cheap probe).
TEAM_PROBE_CALLS = 3  # the first wakes the team's threads and is not recorded
WINDOW = 8  # calls per choice whose mean, less the slowest call, decides (see window_mean)
TRIM_FROM = 4  # calls in a window before its slowest is left out (a team probe's two are not)
# One thread must beat the team by this factor: on a quiet machine noise alone must not
# move a memory-bound kernel onto one thread (a stalled team is 2-100x slower). At 0.7 a
# team up to 1.43x slower than one thread kept running: MobileNetV3-small at 2 threads
# took 2.09 ms a call in the models bench (the host's slow state, where two threads
# together slow down), against 1.79 ms on one thread; with a neighbour busy half the
# time (3 ms on, 3 ms off) 1.82 ms at 0.7 against 1.69 at 0.9 in one of three runs,
# the same in the others.
ONE_THREAD_MARGIN = 0.9
# ... and once on one thread, the team comes back when it is faster by this factor
TEAM_MARGIN = 0.85
# ... or by this one when no thread of the process was preempted during its probe: the
# strict margin is for a neighbour on a core, which preempts a team thread in nearly every
# call (MobileNetV2 at 2 threads: 96 of 100 calls beside a spinning or half-busy process,
# 13-25% of quiet calls). In the host's slow state, where the team gains only 4-7% (6.9-7.1
# ms a call against one thread's 7.2-7.6), the strict margin had kept MobileNetV2 on one
# thread for seconds after onnxruntime's spinning pool (80 ms after its calls) sent it there.
TEAM_MARGIN_UNDISTURBED = 0.97
# ... where "undisturbed" is preempted at most this often: team calls at 2 threads were
# preempted 0.03-0.036 times a millisecond on a quiet machine, and 0.17-0.20 beside a busy
# or a half-busy process (RMSNorm 65536x1024 and MobileNetV2; .scratch/preempt_rate.py). A
# probe shorter than 1/rate (10 ms) is undisturbed only with no preemption at all.
QUIET_PREEMPTIONS_PER_S = 100.0
# Probes of the other choice may cost at most this share of the time spent on the best one:
# beside a busy core a team probe stalls (vit at 2 threads with a spinning neighbour: team
# calls of mean 22 ms against one thread's 9.3, 40% of the loop's time in 53 team calls of
# 245). A probe's cost is its calls' time over the best choice's mean; the next probe waits,
# past its count of calls, until the best choice has run PROBE_BUDGET times that cost. On a
# quiet machine a one-thread probe costs less and the count of calls decides, as before.
PROBE_BUDGET = 0.05
# ... but a probe waits no longer than this after the last one's end: PROBE_WAIT_FIRST_S
# after a switch or its first probe, twice as long after each probe that failed since, up to
# PROBE_WAIT_MAX_S. Load that passes (onnxruntime's pool spinning for 80 ms after its calls,
# which the models bench alternates with mlfuse's) must not keep a model on one thread: in
# the models bench's run with a 1 s cap from the first probe, MobileNetV2's allocating call
# at 2 threads took one thread's time (8.3 ms against 6.6 ms for out=). A neighbour that
# stays fails every probe, and within a second or two the budget decides; when it leaves,
# the team is back within PROBE_WAIT_MAX_S.
PROBE_WAIT_FIRST_S = 0.05
PROBE_WAIT_MAX_S = 1.0
# A call of a team probe (the waking one included) that takes this many times the best
# choice's mean ends the probe: beside a busy core a team call stalls for a scheduler slice
# or more, and the probe's next calls would stall as well (textcnn at 2 threads beside a
# spinning process: probes of 2-3 team calls of 20-55 ms each against one thread's 0.78 ms,
# 18% of the loop's time in 6 of them). On a quiet machine the team is faster than one
# thread, and its waking call took 1.5x one thread's time (GPT-2: 6.8 ms against 4.5).
PROBE_STALL = 3.0
# A team stint that lost after this long was the team's to keep, owing time or not: the waits
# between probes start again from PROBE_WAIT_FIRST_S (see charge_stint). Alternating with
# onnxruntime, whose pool spins after its calls, mlfuse's team runs a whole turn before it
# stalls; beside a spinning neighbour textcnn's stints lasted 50 ms.
LONG_STINT_S = 0.25
wall_clock = time.perf_counter  # what PROBE_WAIT_MAX_S is measured by (tests give their own)
# A call with more minor page faults than this (in the whole process) is not recorded.
FAULTS_IGNORED = 64
# Outputs smaller than this cannot take that many faults (4 KiB pages); see TeamSizer.watch_faults.
FAULT_WATCH_BYTES = FAULTS_IGNORED * 4096


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
            if cls.running == 2:
                pool.set_crowded(True)
            return cls.running > 1, cls.started

    @classmethod
    def leave(cls, number: int) -> bool:
        """Did the call numbered `number` run alone to its end (no call started since)?"""
        with cls.lock:
            cls.running -= 1
            if cls.running == 1:
                pool.set_crowded(False)
            return cls.started == number


class TeamSizer:
    """The thread count of one compiled function's calls, chosen by their times.

    Calls may come from several threads at once: the sample windows are deques
    (appends are atomic) and a lost update of the counter only moves a probe."""

    def __init__(self, watch_faults: bool = True) -> None:
        # whether calls count their page faults: two getrusage calls, which a function
        # whose outputs cannot take FAULTS_IGNORED faults between them is spared
        self.watch_faults = watch_faults
        self.times: dict[int, deque[float]] = {}
        # the preemptions of the process's threads during the team's calls recorded since
        # its window was last cleared, and those calls' seconds; None where a call was not
        # counted (counted only in probes: see team_margin)
        self.probe_preemptions: int | None = None
        self.probe_seconds = 0.0
        # each window's mean, kept by record: choose runs on every call of a small model
        # too, where computing them on every call was a tenth of the runtime's own overhead
        self.means: dict[int, float] = {}
        self.calls = 0
        self.warmed: set[int] = set()  # team sizes whose first (cold) call has run
        self.best: int | None = None  # what the means chose last
        self.gap = FIRST_PROBE  # calls between probes of the other choice
        self.next_probe = 0  # the call number of the next probe
        self.probe_left = 0  # calls of the probe under way still to come
        self.fresh: int | None = None  # the choice whose window the next time it records replaces
        self.previous = 0  # the thread count of the last call (its team's threads may be asleep after 1)
        # since the last probe started: what its calls cost over the best choice's, and the
        # seconds of the best choice's calls after it (see PROBE_BUDGET)
        self.probe_cost = 0.0
        self.best_seconds = 0.0
        self.probe_ended = 0.0  # wall_clock at the last probe call's end, or at the last switch
        self.failed_probes = 0  # probes since the team last lost owing nothing (see PROBE_WAIT_FIRST_S)
        # the calls of the best choice since it was chosen, and their seconds (see charge_stint)
        self.stint_seconds = 0.0
        self.stint_started = 0.0  # wall_clock at the last switch
        self.stint_calls = 0

    def choose(self, team: int) -> int:
        if team <= 1:
            return 1
        self.calls += 1
        one, full = self.means.get(1), self.means.get(team)
        if full is None:
            return team
        if one is None:
            return 1
        # hysteresis: the team must be clearly faster to come back as one thread must be to
        # replace it (on a busy core the team may be only a little slower, and flapping is not)
        stay_one = full >= self.team_margin() * one if self.best == 1 else one < ONE_THREAD_MARGIN * full
        best, other = (1, team) if stay_one else (team, 1)
        if best != self.best:  # a new choice: check it against the other soon
            self.best, self.gap, self.next_probe, self.probe_left = best, FIRST_PROBE, self.calls + FIRST_PROBE, 0
            lasted = wall_clock() - self.stint_started
            owed = self.charge_stint(self.means[best])
            if best == 1 and (not owed or lasted >= LONG_STINT_S):  # load that passed
                self.failed_probes = 0
        if self.probe_left:
            self.probe_left -= 1
            return other
        if self.calls < self.next_probe or self.over_budget():
            return best
        self.probe_cost = self.best_seconds = 0.0
        self.failed_probes += 1  # a probe that brings the team back counts too: see charge_stint
        self.gap = min(2 * self.gap, PROBE_EVERY)
        self.next_probe = self.calls + self.gap
        self.probe_left = (TEAM_PROBE_CALLS if other == team else 1) - 1
        self.fresh = other
        return other

    def over_budget(self) -> bool:
        """Would a probe now spend more than PROBE_BUDGET of the time since the last?"""
        if self.probe_cost <= PROBE_BUDGET * self.best_seconds:
            return False
        wait_max = min(PROBE_WAIT_MAX_S, PROBE_WAIT_FIRST_S * 2 ** max(0, self.failed_probes - 1))
        return wall_clock() - self.probe_ended < wait_max

    def team_margin(self) -> float:
        """How much faster than one thread the team must be to come back: the lenient
        margin when its window's calls were preempted no more often than a quiet
        machine's (`QUIET_PREEMPTIONS_PER_S`), else the strict one. While one thread is
        the choice, the team's window holds only the calls of its last probe (each probe
        clears it)."""
        return TEAM_MARGIN_UNDISTURBED if self.team_undisturbed() else TEAM_MARGIN

    def team_undisturbed(self) -> bool:
        if self.probe_preemptions is None:
            return False
        return self.probe_preemptions <= int(self.probe_seconds * QUIET_PREEMPTIONS_PER_S)

    def record(self, threads: int, seconds: float, preemptions: int | None = None) -> None:
        """Add a call's time to its choice's window; `preemptions`: how often the
        process's threads were preempted during it (None where not counted)."""
        window = self.times.get(threads)
        if window is None:  # not setdefault: that would build a deque on every call
            window = self.times[threads] = deque(maxlen=WINDOW)
        if threads == self.fresh:  # a probe's first time: the window is from before the last switch
            window.clear()
            self.fresh = None
            if threads > 1:
                self.probe_preemptions, self.probe_seconds = 0, 0.0  # of no call yet
        window.append(seconds)
        if threads > 1 and self.probe_preemptions is not None:
            self.probe_seconds += seconds
            self.probe_preemptions = None if preemptions is None else self.probe_preemptions + preemptions
        one_call_probe = threads == 1 and self.best not in (None, 1)  # a probe of one thread is one call
        if len(window) >= 2 or one_call_probe:
            self.means[threads] = window_mean(window)

    def account(self, threads: int, seconds: float) -> None:
        """Charge a call that ran alone to the probe budget (PROBE_BUDGET): a probe's call
        costs its time over the best choice's mean, a call of the best choice adds its time.
        A probe call that stalled (PROBE_STALL) ends its probe."""
        best_mean = self.means.get(self.best) if self.best is not None else None
        if best_mean is None:
            return
        if threads == self.best:
            self.best_seconds += seconds
            self.stint_seconds += seconds
            self.stint_calls += 1
        else:
            self.probe_cost += seconds - best_mean
            self.probe_ended = wall_clock()
            if seconds > PROBE_STALL * best_mean:  # a stalled probe call: its next ones would stall too
                self.probe_left = 0

    def charge_stint(self, new_mean: float) -> float:
        """On a switch, the choice given up ran since the last switch: what its calls took
        over the new choice's mean is the next probe's cost to earn back (returned). A team
        that a probe brought back beside a busy core stalls until its window shows it, a
        failed probe of many calls, and the waits between probes go on growing (choose); a
        team that ran fast for long before losing owes nothing, and one that ran for
        LONG_STINT_S was the team's to keep: the waits start again, and the team is probed
        FIRST_PROBE calls later.

        Beside a spinning neighbour textcnn's team ran 60-call stints, fast but for a
        scheduler tick's stall every eighth call (0.85 ms a call against one thread's 0.75),
        and each switch had reset the wait to PROBE_WAIT_FIRST_S: team probes, whose calls
        stall 50-60 ms after the team's threads slept, came every 50-100 ms."""
        self.probe_cost = max(0.0, self.stint_seconds - self.stint_calls * new_mean)
        self.best_seconds = self.stint_seconds = 0.0
        self.probe_ended = self.stint_started = wall_clock()
        self.stint_calls = 0
        return self.probe_cost

    def call(self, fn: Callable[..., object], args: Sequence[int]) -> None:
        """Run `fn(*args)` on the chosen number of threads (one beside another call), and
        time it if it ran alone and without page faults (counted only where the outputs
        could take them: see `watch_faults`)."""
        crowded, number = _Calls.enter()
        try:
            threads = 1 if crowded else self.choose(cpu.team_size())
            waking = threads > 1 and self.previous == 1  # see the module docstring
            self.previous = threads
            # a team call while one thread is the choice is a probe: count its preemptions (team_margin)
            switches = threads > 1 and self.best == 1
            seconds, faults, preempted = call_with_stack(self.timed_call, fn, args, threads, switches)
        finally:
            alone = _Calls.leave(number) and not crowded
        if not alone or faults > FAULTS_IGNORED:
            return
        self.account(threads, seconds)  # the waking call too: it is part of a probe's cost
        if waking:
            return
        if threads in self.warmed:
            self.record(threads, seconds, preemptions=preempted if switches else None)
        else:  # page faults and the team's start: a first call would decide for a long time
            self.warmed.add(threads)

    def timed_call(self, fn: Callable[..., object], args: Sequence[int], threads: int,
                   switches: bool = False) -> tuple[float, int, int]:
        """`fn(*args)` on a team of `threads`: its seconds, the page faults it took, and
        (with `switches`) how often the process's threads were preempted meanwhile."""
        before = cpu.enter_team(threads)
        watch = self.watch_faults or switches
        try:
            usage = resource.getrusage(resource.RUSAGE_SELF) if watch else None
            start = time.perf_counter()
            fn(*args)
            seconds = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_SELF) if watch else None
        finally:
            cpu.leave_team(before, threads)
        if usage is None or after is None:
            return seconds, 0, 0
        faults = after.ru_minflt - usage.ru_minflt if self.watch_faults else 0
        return seconds, faults, after.ru_nivcsw - usage.ru_nivcsw


def window_mean(window: deque[float]) -> float:
    """The mean of a window's calls, less its slowest once it holds TRIM_FROM calls.

    Means, not medians: beside a busy core most team calls are fast and a quarter stall for
    the rest of a scheduler slice, which a median does not see. textcnn at 2 threads with a
    process spinning on one CPU: team calls of median 0.40 ms and mean 1.43 ms, one thread
    0.77 ms; by medians the sizer kept the team and the loop's mean call was 3.1x its quiet
    time. Less the slowest: a quiet host's lone hiccup must not send a model to one thread;
    stalls come often enough to show in the rest."""
    total = sum(window)
    if len(window) < TRIM_FROM:
        return total / len(window)
    return (total - max(window)) / (len(window) - 1)
