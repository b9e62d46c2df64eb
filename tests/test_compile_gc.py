"""mlfuse.api.fewer_collections: the GC thresholds are raised while anything compiles
and restored when the last compile ends, also when it fails or several overlap."""

from __future__ import annotations

import gc
import threading

import pytest

import mlfuse
from mlfuse.api import COMPILE_GC_THRESHOLD, fewer_collections
from mlfuse.diagnostics import Diagnostic


@pytest.fixture
def user_threshold():
    saved = gc.get_threshold()
    gc.set_threshold(701, 11, 12)
    yield (701, 11, 12)
    gc.set_threshold(*saved)


def test_raised_inside_restored_after(user_threshold):
    with fewer_collections():
        assert gc.get_threshold() == COMPILE_GC_THRESHOLD
        with fewer_collections():
            assert gc.get_threshold() == COMPILE_GC_THRESHOLD
        assert gc.get_threshold() == COMPILE_GC_THRESHOLD  # the outer compile still runs
    assert gc.get_threshold() == user_threshold


def test_restored_after_a_failed_compile(user_threshold):
    with pytest.raises(Diagnostic):
        mlfuse.compile("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> { func.return %y : tensor<4xf32> }")
    assert gc.get_threshold() == user_threshold


def test_overlapping_compiles_in_threads_restore_once(user_threshold):
    entered, release = threading.Barrier(3), threading.Event()

    def compile_like():
        with fewer_collections():
            entered.wait()
            release.wait()

    threads = [threading.Thread(target=compile_like) for _ in range(2)]
    for t in threads:
        t.start()
    entered.wait()
    assert gc.get_threshold() == COMPILE_GC_THRESHOLD
    release.set()
    for t in threads:
        t.join()
    assert gc.get_threshold() == user_threshold
