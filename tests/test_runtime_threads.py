"""Compiled functions under threads and fork, and the checks on their arguments.

Every wait has a timeout, so a hang (a shared arena, libgomp's team after fork)
fails the test instead of blocking the suite.
"""

from __future__ import annotations

import itertools
import mmap
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import mlfuse
from mlfuse.api import aligned_empty
from mlfuse.backend import cpu, team
from mlfuse.backend.team import (
    FAULT_WATCH_BYTES,
    FIRST_PROBE,
    ONE_THREAD_MARGIN,
    PROBE_EVERY,
    QUIET_PREEMPTIONS_PER_S,
    TEAM_MARGIN,
    TEAM_MARGIN_UNDISTURBED,
    TEAM_PROBE_CALLS,
    TeamSizer,
)

# two GEMMs and a row reduction: several kernels, intermediates in the arena
GRAPH = """
func.func @main(%x: tensor<256x128xf32>, %w: tensor<128x128xf32>) -> (tensor<256x128xf32>, tensor<256x1xf32>) {
  %h = graph.matmul %x, %w : (tensor<256x128xf32>, tensor<128x128xf32>) -> tensor<256x128xf32>
  %t = graph.tanh %h : tensor<256x128xf32>
  %y = graph.matmul %t, %w : (tensor<256x128xf32>, tensor<128x128xf32>) -> tensor<256x128xf32>
  %e = graph.exp %y : tensor<256x128xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<256x128xf32> -> tensor<256x1xf32>
  func.return %y, %s : tensor<256x128xf32>, tensor<256x1xf32>
}
"""

PAIR = """
func.func @main(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %a = graph.add %x, %w : tensor<16x16xf32>
  %m = graph.mul %x, %w : tensor<16x16xf32>
  func.return %a, %m : tensor<16x16xf32>, tensor<16x16xf32>
}
"""

THREADS, CALLS, TIMEOUT_S = 4, 25, 120


@pytest.fixture(scope="module")
def fn():
    f = mlfuse.compile(GRAPH)
    assert f.jit.global_int("main__arena_bytes") > 0, "the graph must use an arena, or the test proves nothing"
    return f


@pytest.fixture
def team_of_two():
    """A real team (2 threads) even on a 1-core machine; the old setting afterwards."""
    before = cpu.team_size()
    cpu.set_num_threads(2)
    yield
    cpu.set_num_threads(before)


def make_inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((256, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) / 12).astype(np.float32)
    return [x, w]


def misaligned(shape, dtype) -> np.ndarray:
    """A C-contiguous array whose data is 4 bytes past a 64-byte boundary."""
    dtype = np.dtype(dtype)
    raw = aligned_empty((int(np.prod(shape)) * dtype.itemsize + 64,), np.uint8)
    return raw[4 : 4 + int(np.prod(shape)) * dtype.itemsize].view(dtype).reshape(shape)


def run_threads(target, n: int) -> None:
    """Run target(i) on n threads that start together; fail on an exception or a hang."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def body(i):
        try:
            barrier.wait(timeout=TIMEOUT_S)
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"threads still running after {TIMEOUT_S} s"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("outputs", ["fresh", "aligned-out", "misaligned-out"])
def test_threads_match_sequential_calls(fn, team_of_two, outputs):
    inputs = [make_inputs(seed) for seed in range(CALLS)]
    expected = [fn(*args) for args in inputs]
    results: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def worker(t):
        alloc = aligned_empty if outputs == "aligned-out" else misaligned
        out = None if outputs == "fresh" else [alloc(s.shape, s.dtype) for s in fn.outputs]
        for c in range(CALLS):
            k = (c + t) % CALLS  # threads work on different inputs at the same moment
            got = fn(*inputs[k], out=out)
            results[t, c] = tuple(g.copy() for g in got)

    run_threads(worker, THREADS)
    wrong = [
        (t, c)
        for (t, c), got in results.items()
        if not all(np.array_equal(g, e) for g, e in zip(got, expected[(c + t) % CALLS]))
    ]
    assert len(results) == THREADS * CALLS
    assert not wrong, f"{len(wrong)} of {len(results)} concurrent results differ from sequential ones"
    assert len(fn._arenas) <= fn.MAX_POOLED_ARENAS


def test_set_num_threads_reaches_other_threads(team_of_two):
    seen = []

    def worker(i):
        with cpu.team_of(cpu.team_size()):  # a call runs on this team or on one thread
            seen.append(cpu.get_max_threads())

    cpu.set_num_threads(1)
    run_threads(worker, 2)
    assert seen == [1, 1]


def test_a_call_runs_on_its_team_and_gives_the_thread_its_setting_back(team_of_two):
    """libgomp's per-thread team size is shared with torch's CPU ops and any other OpenMP
    code in the process: each call sets it for itself and puts back what it found (a
    cached setting left mlfuse's calls on one thread after torch.set_num_threads(1),
    and torch's ops on one thread after mlfuse's one-thread probes)."""
    gomp = cpu._gomp()
    before = cpu.get_max_threads()
    sizer, seen = TeamSizer(), []
    try:
        for other in (1, 3, 2):
            gomp.omp_set_num_threads(other)  # what torch.set_num_threads(other) does
            sizer.call(lambda: seen.append(cpu.get_max_threads()), [])
            assert cpu.get_max_threads() == other
    finally:
        gomp.omp_set_num_threads(before)
    assert seen == [2, 2, 2]


def test_team_sizer_runs_the_faster_choice_and_probes_the_other():
    """Times are given, not measured: the choice follows them, whatever the machine."""
    sizer = TeamSizer()
    assert sizer.choose(1) == 1  # one thread allowed: nothing to choose
    first = [sizer.choose(2) for _ in range(2)]
    assert first == [2, 2]  # no times yet: the full team first
    for t in (5.0, 5.0):
        sizer.record(2, t)
    assert sizer.choose(2) == 1  # then one thread, to compare
    for t in (1.0, 1.0):
        sizer.record(1, t)
    # a busy neighbour: one thread; the team is probed three calls at a time (the first
    # wakes its threads), soon after the switch and then at doubling gaps (2, 4, 8, ...
    # calls) up to PROBE_EVERY
    choices = "".join(str(sizer.choose(2)) for _ in range(2 * PROBE_EVERY))
    assert choices.startswith("11222122211111222")  # gaps count the probe's calls
    probes = re.findall("2+", choices)
    assert len(probes) == 5 and all(len(p) == TEAM_PROBE_CALLS for p in probes[:-1])
    assert choices[-2 * PROBE_EVERY // 2 + 2 :].count("2") <= TEAM_PROBE_CALLS  # PROBE_EVERY apart at the end
    for t in (0.5, 0.5):  # the neighbour is gone: the team's probe is fast, and replaces its window
        sizer.record(2, t)
    choices = "".join(str(sizer.choose(2)) for _ in range(2 * PROBE_EVERY))
    assert choices.startswith("221222122222221")  # one-thread probes are single calls
    assert choices.count("1") == 5


def test_team_sizer_needs_a_clear_win_to_switch_either_way():
    """Hysteresis: on a busy core the team may be only a little slower than one thread,
    and switching back and forth would pay its stalls each time."""
    sizer = TeamSizer()
    for threads, t in ((2, 3.0), (2, 3.0), (1, 1.0), (1, 1.0)):
        sizer.record(threads, t)
    assert sizer.choose(2) == 1

    def next_probe(threads: int) -> None:  # run to the next probe of `threads`, through its calls
        while sizer.choose(2) != threads:
            pass
        if threads == 2:
            assert [sizer.choose(2) for _ in range(TEAM_PROBE_CALLS - 1)] == [2] * (TEAM_PROBE_CALLS - 1)

    next_probe(2)
    for t in (0.9, 0.9):  # faster than one thread, but not by TEAM_MARGIN: one thread stays
        sizer.record(2, t)
    assert sizer.choose(2) == 1
    next_probe(2)
    for t in (0.5, 0.5):  # clearly faster: the team comes back
        sizer.record(2, t)
    assert sizer.choose(2) == 2
    next_probe(1)
    sizer.record(1, 0.47)  # one thread a little faster than the team, not by ONE_THREAD_MARGIN
    assert [sizer.choose(2) for _ in range(FIRST_PROBE)] == [2] * FIRST_PROBE
    assert 0.47 > ONE_THREAD_MARGIN * 0.5 and TEAM_MARGIN < 1 and ONE_THREAD_MARGIN < 1


def test_a_team_that_stalls_now_and_then_loses_by_its_mean():
    """Beside a busy core most team calls are fast and some stall for a scheduler slice:
    the team's median looks fine, its mean does not (textcnn: 0.40 ms median, 1.43 ms
    mean, 0.77 ms on one thread). One slow call in a window is a quiet host's hiccup and
    is left out."""
    hiccup, stalls = TeamSizer(), TeamSizer()
    for sizer, team_times in ((hiccup, [0.4] * 7 + [5.0]), (stalls, [0.4] * 6 + [4.4] * 2)):
        for t in team_times:
            sizer.record(2, t)
        for t in (0.77, 0.77):
            sizer.record(1, t)
    assert hiccup.choose(2) == 2
    assert stalls.choose(2) == 1


class SimulatedCalls:
    """Calls whose times are given per thread count, on a clock that advances by them."""

    def __init__(self, sizer: TeamSizer, monkeypatch) -> None:
        self.sizer, self.now = sizer, 0.0
        monkeypatch.setattr(team, "wall_clock", lambda: self.now)

    def run(self, seconds: dict[int, float] | Callable[[int, str], float], calls: int) -> str:
        """The thread counts chosen, one digit a call; `seconds` gives each call's time by
        its thread count, or (a function) by its thread count and the choices before it."""
        chosen: list[str] = []
        for _ in range(calls):
            threads = self.sizer.choose(2)
            took = seconds[threads] if isinstance(seconds, dict) else seconds(threads, "".join(chosen[-64:]))
            self.now += took
            self.sizer.account(threads, took)
            self.sizer.record(threads, took)
            chosen.append(str(threads))
        return "".join(chosen)


def one_thread_calls_between_probes(chosen: str) -> list[int]:
    return [len(run) for run in re.findall("(?<=2)1+(?=2)", chosen)]


def test_probes_of_a_stalling_team_spend_at_most_the_budget(monkeypatch):
    """A team probe beside a busy core costs many one-thread calls (vit: 22 ms team calls
    against 9 ms). The wait after a failed probe doubles from PROBE_WAIT_FIRST_S (load that
    passes) until the one-thread calls in it take 1 / PROBE_BUDGET times the probe's cost,
    and is never longer than PROBE_WAIT_MAX_S, so the team comes back soon after the
    neighbour leaves. Without the budget, probes would come every PROBE_EVERY calls. (Each
    probe here is one team call: a stalled call ends it, see the next test.)"""
    for team_s, steady_wait_s in ((0.010, 0.009 / team.PROBE_BUDGET), (0.5, team.PROBE_WAIT_MAX_S)):
        sizer = TeamSizer()
        calls = SimulatedCalls(sizer, monkeypatch)
        busy = {1: 0.001, 2: team_s}
        for threads in (2, 2, 1, 1):
            sizer.record(threads, busy[threads])
        waits = [n * busy[1] for n in one_thread_calls_between_probes(calls.run(busy, 6000))]
        expected = [min(team.PROBE_WAIT_FIRST_S * 2**i, steady_wait_s) for i in range(len(waits))]
        assert waits == pytest.approx(expected, abs=0.003), (team_s, waits)
        assert len(waits) >= 6


def test_a_team_probe_ends_at_its_first_stalled_call(monkeypatch):
    """Beside a busy core a team call stalls for a scheduler slice (textcnn: 20-55 ms
    against one thread's 0.78 ms); a probe of the team ends at the first call slower than
    PROBE_STALL times one thread's mean, instead of stalling TEAM_PROBE_CALLS times. A
    probe whose calls are slow but not stalled (a team a little slower than one thread)
    runs all its calls."""
    for team_s, probe_calls in ((0.030, 1), (0.0009, TEAM_PROBE_CALLS)):
        sizer = TeamSizer()
        calls = SimulatedCalls(sizer, monkeypatch)
        times = {1: 0.0008, 2: team_s}
        for threads in (2, 2, 1, 1):
            sizer.record(threads, times[threads])
        chosen = calls.run(times, 3000)
        probes = [len(run) for run in re.findall("2+", chosen)]
        assert len(probes) >= 4 and set(probes) == {probe_calls}, (team_s, probes)


def test_waits_between_probes_keep_growing_while_team_stints_lose(monkeypatch):
    """Beside a spinning neighbour (textcnn) every other team call after one-thread calls
    stalls 55 ms (its threads slept), and a team that runs stalls a scheduler tick every
    eighth call: 0.87 ms a call against one thread's 0.75. The team's short stints then owe
    time when they lose, and the wait before the next probe goes on doubling instead of
    starting again from PROBE_WAIT_FIRST_S (a stint of LONG_STINT_S restarts them): the
    loop takes 1.21x one thread's time (1.58x with the wait reset at each switch)."""
    team_calls, wakes = itertools.count(1), itertools.count(1)

    def busy(threads: int, before: str) -> float:
        if threads == 1:
            return 0.75e-3
        if not before.endswith("2") and next(wakes) % 2:
            return 0.055
        return 4.4e-3 if next(team_calls) % 8 == 0 else 0.37e-3

    sizer = TeamSizer()
    calls = SimulatedCalls(sizer, monkeypatch)
    for threads, t in ((2, 0.37e-3), (2, 0.37e-3), (1, 0.75e-3), (1, 0.75e-3)):
        sizer.record(threads, t)
    chosen = calls.run(busy, 40000)
    assert calls.now < 1.3 * 40000 * 0.75e-3, (calls.now, chosen.count("2"))


def test_a_team_stint_that_stalled_is_charged_as_a_probe(monkeypatch):
    """A probe's two fast calls bring the team back beside a busy core; its stalls then
    show in its window and one thread returns. Those stalls were the probe's cost: the
    next probe waits for them to be paid back. A team that ran fast for long before it
    lost owes nothing and is probed again FIRST_PROBE calls later."""
    for fast_calls, owes in ((4, True), (400, False)):
        sizer = TeamSizer()
        calls = SimulatedCalls(sizer, monkeypatch)
        for threads, t in ((2, 0.5), (2, 0.5), (1, 0.8), (1, 0.8)):
            sizer.record(threads, t * 1e-3)
        assert calls.run({1: 0.8e-3, 2: 0.5e-3}, fast_calls).endswith("2")
        chosen = calls.run({1: 0.8e-3, 2: 4.5e-3}, 40)  # the neighbour arrives: every call stalls
        switch = chosen.index("1")
        assert switch <= 6  # two stalls in the window outweigh the fast calls
        assert ("2" in chosen[switch:]) != owes


@pytest.mark.parametrize("call_s", [1.0, 0.004])
def test_a_team_probe_preempted_no_more_than_a_quiet_process_comes_back_by_the_lenient_margin(call_s):
    """In the host's slow state the team gains only a few percent; a probe whose calls
    were preempted no more often than a quiet process's (QUIET_PREEMPTIONS_PER_S: a
    neighbour on a core preempts six times as often) brings it back by
    TEAM_MARGIN_UNDISTURBED, a busier one only by TEAM_MARGIN. The allowance grows with
    the probe's length: a 4 ms call may not be preempted at all, a second-long one a few
    times."""
    sizer = TeamSizer()
    for threads, t in ((2, 3.0), (2, 3.0), (1, 1.0), (1, 1.0)):
        sizer.record(threads, t * call_s)
    assert sizer.choose(2) == 1

    def probe(preemptions: list[int | None]) -> int:  # the team's next probe, recorded; then the choice
        while sizer.choose(2) != 2:
            pass
        assert [sizer.choose(2) for _ in range(TEAM_PROBE_CALLS - 1)] == [2] * (TEAM_PROBE_CALLS - 1)
        for count in preemptions:
            sizer.record(2, 0.94 * call_s, preemptions=count)
        return sizer.choose(2)

    assert TEAM_MARGIN < 0.94 < TEAM_MARGIN_UNDISTURBED < 1
    quiet = int(0.9 * 2 * 0.94 * call_s * QUIET_PREEMPTIONS_PER_S)  # under what the two calls may take
    busy = int(0.2e3 * 2 * 0.94 * call_s) + 1  # a neighbour's rate: 0.2 a millisecond
    assert probe([busy, 0]) == 1  # the strict margin: one thread stays
    assert probe([0, None]) == 1  # a call not counted: the strict margin
    assert probe([quiet, 0]) == 2  # a quiet probe 6% faster: the team comes back
    assert (quiet > 0) == (call_s > 0.01)


def test_a_call_beside_another_runs_on_one_thread_and_neither_is_recorded(team_of_two):
    """Two Python threads call at once: the second runs on one thread (two teams of two
    would share two cores), and neither time goes into the sizer's windows."""
    sizer = TeamSizer()
    sizer.warmed.update({1, 2})  # past the cold first calls, which are never recorded
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def first_fn():
        seen["first"] = cpu.get_max_threads()
        inside.set()
        assert release.wait(TIMEOUT_S)

    def second_fn():
        seen["second"] = cpu.get_max_threads()

    first = threading.Thread(target=sizer.call, args=(first_fn, []), daemon=True)
    first.start()
    assert inside.wait(TIMEOUT_S)
    sizer.call(second_fn, [])
    release.set()
    first.join(TIMEOUT_S)
    assert seen == {"first": 2, "second": 1}
    assert not any(sizer.times.values())
    sizer.call(second_fn, [])  # alone again: the team, which wakes its threads (not recorded)
    sizer.call(second_fn, [])  # and then is recorded
    assert seen["second"] == 2 and len(sizer.times[2]) == 1


def test_the_team_call_after_one_thread_is_not_recorded(team_of_two):
    """The team's threads slept through a call on one thread: the next team call pays
    their wake-up (up to a host scheduler tick on a busy VM), which says nothing of the
    team's speed; the call after it is recorded."""
    sizer = TeamSizer()
    sizer.warmed.update({1, 2})
    seen = []

    def fn():
        seen.append(cpu.get_max_threads())

    sizer.previous = 1  # as after a one-thread probe
    sizer.call(fn, [])
    assert seen == [2] and not sizer.times.get(2)
    sizer.call(fn, [])
    assert seen == [2, 2] and len(sizer.times[2]) == 1


def test_calls_record_their_team(team_of_two):
    fn = mlfuse.compile(PAIR)
    args = [np.ones(s.shape, s.dtype) for s in fn.inputs]
    for _ in range(8):
        fn(*args)
    assert set(fn._team.times) == {1, 2} and all(fn._team.times.values())


def test_a_call_that_faults_its_outputs_in_is_not_recorded(team_of_two):
    """A call writing fresh pages (np.empty outputs) is timed with the kernel's page
    faults, which say nothing of the team; outputs too small to take FAULTS_IGNORED
    faults are not watched (two getrusage calls saved on every call)."""
    sizer = TeamSizer(watch_faults=True)

    def touch_fresh_pages():  # fresh pages each time (malloc would reuse freed ones): a fault per page
        with mmap.mmap(-1, 4 * FAULT_WATCH_BYTES) as pages:
            np.frombuffer(pages, np.uint8)[:] = 1

    for _ in range(4):
        sizer.call(touch_fresh_pages, [])
    assert not any(sizer.times.values()), "calls that faulted were recorded"
    unwatched = TeamSizer(watch_faults=False)
    for _ in range(4):
        unwatched.call(touch_fresh_pages, [])
    assert any(unwatched.times.values()), "calls were not recorded"

    small, large = mlfuse.compile(PAIR), mlfuse.compile(GRAPH.replace("256x", "1024x"))
    assert not small._team.watch_faults and large._team.watch_faults


# --- argument checks -----------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    return mlfuse.compile(PAIR)


def pair_inputs():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2)]


def test_same_out_array_twice_is_rejected(pair):
    a = aligned_empty((16, 16), np.float32)
    with pytest.raises(ValueError, match="'result0' and 'result1' overlap"):
        pair(*pair_inputs(), out=[a, a])


def test_partially_overlapping_outputs_are_rejected(pair):
    buf = aligned_empty((16 * 16 + 16,), np.float32)
    first, second = buf[:256].reshape(16, 16), buf[16:272].reshape(16, 16)
    with pytest.raises(ValueError, match="overlap"):
        pair(*pair_inputs(), out=[first, second])
    with pytest.raises(ValueError, match="overlap"):
        pair(*pair_inputs(), out=[second, first])


def test_adjacent_outputs_are_accepted(pair):
    x, w = pair_inputs()
    buf = aligned_empty((512,), np.float32)
    first, second = buf[:256].reshape(16, 16), buf[256:].reshape(16, 16)
    pair(x, w, out=[first, second])
    np.testing.assert_array_equal(first, x + w)
    np.testing.assert_array_equal(second, x * w)


def test_input_by_position_and_keyword_is_rejected(pair):
    x, w = pair_inputs()
    with pytest.raises(ValueError, match="'x' given both by position and by keyword"):
        pair(x, w, x=w)
    with pytest.raises(ValueError, match="takes 2 inputs, got 3"):
        pair(x, w, x, w=w)
    a, m = pair(x, w=w)  # positional and keyword for different inputs is fine
    np.testing.assert_array_equal(a, x + w)


# --- fork ---------------------------------------------------------------------------


def wait_child(pid: int, timeout_s: float = TIMEOUT_S) -> int:
    """The exit code of a forked child; kill it and fail if it runs past the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"forked child hung for {timeout_s} s in its first call")


def test_forked_child_completes_its_call(fn, team_of_two):
    args = make_inputs(1)
    expected = fn(*args)  # the parent's team now exists
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            got = fn(*args)
            same = all(np.array_equal(g, e) for g, e in zip(got, expected))
            code = 0 if same and cpu.get_max_threads() == 1 else 2
        finally:
            os._exit(code)
    assert wait_child(pid) == 0, "the child's results differ (2) or it failed (1)"
    # the parent keeps its team
    assert cpu.team_size() == 2
    assert all(np.array_equal(g, e) for g, e in zip(fn(*args), expected))


_FORKED_FN: list = []  # the compiled function, for the pool's forked workers


def _call_in_worker(seed: int) -> tuple[tuple[np.ndarray, ...], int]:
    return _FORKED_FN[0](*make_inputs(seed)), cpu.get_max_threads()


def test_multiprocessing_fork_pool(fn, team_of_two):
    expected = [fn(*make_inputs(seed)) for seed in range(4)]
    _FORKED_FN[:] = [fn]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pending = pool.map_async(_call_in_worker, range(4))
        answers = pending.get(timeout=TIMEOUT_S)  # multiprocessing.TimeoutError on a hang
    for (got, threads), want in zip(answers, expected):
        assert threads == 1
        assert all(np.array_equal(g, e) for g, e in zip(got, want))


# --- recycled outputs of allocating calls --------------------------------------------------------


# expand-math's exp is within 0.9 ulp of the exact value: 2 ulps of f32 against float64
EXP_RTOL = 2 * 2.0**-23


def exact_exp(x: np.ndarray) -> np.ndarray:
    return np.exp(x.astype(np.float64))


@pytest.fixture(scope="module")
def big_fn():
    """A function whose output (1 MiB) is large enough to be recycled."""
    src = """func.func @main(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %y = graph.exp %x : tensor<512x512xf32>
  func.return %y : tensor<512x512xf32>
}"""
    return mlfuse.compile(src)


def test_dropped_results_are_recycled(big_fn):
    x = np.random.default_rng(11).standard_normal((512, 512)).astype(np.float32)
    addresses = set()
    for _ in range(6):
        (y,) = big_fn(x)  # the previous y is dropped only after this call
        addresses.add(y.ctypes.data)
    assert len(addresses) == 2  # two sets in rotation: warm memory, no page faults
    np.testing.assert_allclose(y, exact_exp(x), rtol=EXP_RTOL)


def test_results_kept_then_dropped_together_are_recycled(big_fn):
    """`ys = [f(x) for x in batch]`, then the next batch: its outputs are the first
    batch's memory (malloc would have given it back to the system: a page fault per
    page), and the first batch's values were never overwritten while it was held."""
    rng = np.random.default_rng(15)
    xs = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(5)]
    first = [big_fn(x)[0] for x in xs]
    addresses = {y.ctypes.data for y in first}
    assert len(addresses) == 5
    assert all(np.allclose(y, exact_exp(x), rtol=EXP_RTOL) for x, y in zip(xs, first))
    del first
    second = [big_fn(x)[0] for x in xs[::-1]]
    assert {y.ctypes.data for y in second} == addresses
    assert all(any(y is kept[0] for kept in big_fn._issued) for y in second), "each output a recycled set"
    assert all(np.allclose(y, exact_exp(x), rtol=EXP_RTOL) for x, y in zip(xs[::-1], second))
    assert len(big_fn._issued) <= big_fn._recycled_sets


def test_held_results_and_views_are_never_overwritten(big_fn):
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(5)]
    kept = [big_fn(xs[0])[0], big_fn(xs[1])[0][3:]]  # an array, and a view of one
    as_tuple = big_fn(xs[2])  # the whole result tuple
    for x in xs[3:]:
        big_fn(x)  # dropped at once: these may reuse each other's memory, not the ones above
    np.testing.assert_allclose(kept[0], exact_exp(xs[0]), rtol=EXP_RTOL)
    np.testing.assert_allclose(kept[1], exact_exp(xs[1])[3:], rtol=EXP_RTOL)
    np.testing.assert_allclose(as_tuple[0], exact_exp(xs[2]), rtol=EXP_RTOL)


def test_recycling_from_threads(big_fn):
    """Concurrent allocating calls never get the same output memory."""
    rng = np.random.default_rng(13)
    xs = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            results = list(pool.map(lambda x: big_fn(x)[0], xs))
            for x, y in zip(xs, results):
                np.testing.assert_allclose(y, exact_exp(x), rtol=EXP_RTOL)


def test_out_arrays_aligned_to_16_bytes_need_no_copy(big_fn):
    """np.empty gives 16-byte alignment: such out= arrays run a variant compiled for it
    (written in place, no staged copy); anything less aligned is still staged."""
    x = np.random.default_rng(14).standard_normal((512, 512)).astype(np.float32)
    raw = np.empty(512 * 512 * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + 16  # 16-byte aligned, not 64
    out = raw[start : start + 512 * 512 * 4].view(np.float32).reshape(512, 512)
    out.fill(np.nan)
    (y,) = big_fn(x, out=[out])
    assert y is out and big_fn._loose is not None and big_fn._loose.output_alignment == 16
    np.testing.assert_allclose(out, exact_exp(x), rtol=EXP_RTOL)
    odd = raw[start + 4 : start + 4 + 512 * 512 * 4].view(np.float32).reshape(512, 512)  # 4-byte aligned
    odd.fill(np.nan)
    big_fn(x, out=[odd])
    np.testing.assert_allclose(odd, exact_exp(x), rtol=EXP_RTOL)


def test_with_output_alignment_rewrites_the_llvm_step():
    from mlfuse.api import with_output_alignment

    assert with_output_alignment(["cse", "convert-to-llvm"], 16) == ["cse", "convert-to-llvm{output-alignment=16}"]
    assert with_output_alignment(["convert-to-llvm{fast-math=true}"], 16) == [
        "convert-to-llvm{fast-math=true output-alignment=16}"
    ]
    assert with_output_alignment(["convert-to-llvm{output-alignment=32}"], 16) is None


SMALL_STACK_SCRIPT = """
import sys, threading
import numpy as np
import mlfuse
from mlfuse.frontend.builder import GraphBuilder
rng = np.random.default_rng(5)
x = rng.standard_normal((1, 128, 28, 28)).astype(np.float32)
w = (rng.standard_normal((128, 128, 3, 3)) * 0.05).astype(np.float32)
b = GraphBuilder()
b.output(b.relu(b.conv2d(b.input("x", x.shape, "f32"), b.constant(w, "f32"), [1, 1], [1] * 4, [1, 1], 1)))
fn = mlfuse.compile(b.module())
want = fn(x)[0].copy()
got = {}
threading.stack_size(128 * 1024)
def call():
    from mlfuse.backend.stack import enough_stack
    got["enough"] = enough_stack()
    out = np.full(want.shape, np.nan, np.float32)
    fn(x, out=[out])
    got["y"] = out
t = threading.Thread(target=call)
t.start()
t.join()
assert got["enough"] is False, got
assert np.array_equal(got["y"], want), "different results on the small-stack thread"
print("same bits")
"""


def test_a_thread_with_a_small_stack_calls_through_the_helper(tmp_path):
    """A 3x3 conv 128 -> 128 over 28 x 28 (a Winograd kernel on AVX-512: 229 KB of its
    transformed input on the stack) called from a thread with a 128 KiB stack: the call
    runs on mlfuse's large-stack helper (it died of SIGSEGV before), same bits as the
    main thread's call. In a subprocess, so that a crash fails the test, not the run."""
    import subprocess
    import sys

    env = {**os.environ, "MLFUSE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SMALL_STACK_SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "same bits" in done.stdout


def test_the_main_thread_calls_in_place():
    from mlfuse.backend.stack import NEEDED, call_with_stack, enough_stack, thread_stack_bytes

    size = thread_stack_bytes()
    assert size is None or size >= NEEDED
    assert enough_stack()
    assert call_with_stack(threading.get_ident) == threading.get_ident()
