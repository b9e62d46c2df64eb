"""The on-disk cache under damage, foreign entries, bad permissions and failed writes.

Every test uses a cache folder of its own and an empty in-memory cache, so the
disk path is what runs. A graph has a graph entry (the keys of its objects) and an
object entry per kernel (mlfuse/backend/kernels.py). A bad entry must be discarded
(never loaded), reported once, rebuilt, and the results must match the reference.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
from collections import OrderedDict
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import mlfuse
from mlfuse import api, cache
from mlfuse.backend import cpu

GRAPH = """
func.func @main(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<64x1xf32> {
  %bb = graph.broadcast %b {dims = array<i64: 1>} : tensor<32xf32> -> tensor<64x32xf32>
  %y = graph.add %x, %bb : tensor<64x32xf32>
  %e = graph.exp %y : tensor<64x32xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<64x32xf32> -> tensor<64x1xf32>
  func.return %s : tensor<64x1xf32>
}
"""
OTHER = """
func.func @main(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<64x1xf32> {
  %bb = graph.broadcast %b {dims = array<i64: 1>} : tensor<32xf32> -> tensor<64x32xf32>
  %y = graph.mul %x, %bb : tensor<64x32xf32>
  %s = graph.reduce_max %y {axes = array<i64: 1>, keepdims} : tensor<64x32xf32> -> tensor<64x1xf32>
  func.return %s : tensor<64x1xf32>
}
"""
SUFFIX = f".v{cache.FORMAT_VERSION}.o"


@pytest.fixture
def loaded(monkeypatch) -> list[bytes]:
    """Every object code handed to the JIT from now on (each object of a module of several)."""
    seen: list[bytes] = []
    original = cpu.JitModule.__init__

    def record(self, object_code, constants=None):
        seen.extend([object_code] if isinstance(object_code, bytes) else object_code)
        original(self, object_code, constants)

    monkeypatch.setattr(cpu.JitModule, "__init__", record)
    return seen


def compile_and_check(source: str = GRAPH) -> None:
    """Compile from scratch in memory (the disk cache may answer) and check against the reference."""
    api._MEMORY_CACHE.clear()
    f = mlfuse.compile(source)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    (got,) = f(x, b)
    (want,) = mlfuse.reference(source)(x, b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def key_of(path: Path) -> str:
    return path.name[: -len(SUFFIX)]


def payload(blob: bytes) -> bytes:
    """The object code after an entry's header (no checks)."""
    start = len(cache.MAGIC) + 4
    return blob[start + int.from_bytes(blob[len(cache.MAGIC) : start], "little") :]


def rewrite_header(blob: bytes, **changes) -> bytes:
    """The entry with header fields changed; the payload and its checksum untouched."""
    start = len(cache.MAGIC) + 4
    size = int.from_bytes(blob[len(cache.MAGIC) : start], "little")
    header = {**json.loads(blob[start : start + size]), **changes}
    text = json.dumps(header).encode()
    return cache.MAGIC + len(text).to_bytes(4, "little") + text + blob[start + size :]


def invert_machine_code(blob: bytes) -> bytes:
    """Up to 64 bytes in the middle of the object's .text section, inverted; the header
    kept (an entry that only calls its kernels has a few bytes of code). A graph entry
    (the keys of its objects, no machine code) has its middle bytes inverted."""
    if not payload(blob).startswith(b"\x7fELF"):
        return invert_middle(blob, len(blob) - len(payload(blob)), len(payload(blob)))
    obj = llvm.ObjectFileRef.from_data(payload(blob))  # kept alive while its sections are read
    text = max((s.data() for s in obj.sections() if s.is_text()), key=len)
    assert len(text) >= 8
    return invert_middle(blob, blob.index(text), len(text))


def invert_middle(blob: bytes, start: int, length: int) -> bytes:
    """`blob` with up to 64 bytes in the middle of [start, start + length) inverted."""
    size = min(64, length)
    at = start + (length - size) // 2
    return blob[:at] + bytes(~c & 0xFF for c in blob[at : at + size]) + blob[at + size :]


def break_elf(blob: bytes) -> bytes:
    at = len(blob) - len(payload(blob))
    return blob[:at] + b"\x7fFLE\xff\xff\xff\xff" + blob[at + 8 :]


DAMAGES = {
    "empty": lambda blob: b"",
    "truncated": lambda blob: blob[: len(blob) // 2],
    "garbage": lambda blob: np.random.default_rng(11).bytes(len(blob)),
    "broken-elf-header": break_elf,
    "machine-code-inverted": invert_machine_code,
    "other-host": lambda blob: rewrite_header(blob, host="x86_64-unknown-linux-gnu|znver3|+avx2,-avx512f"),
    "other-format": lambda blob: rewrite_header(blob, format=cache.FORMAT_VERSION + 1),
    "header-lies-about-length": lambda blob: rewrite_header(blob, length=len(payload(blob)) + 1),
}


def assert_all_good(root: Path) -> None:
    """Every entry is valid for its key on this host."""
    for path in entries(root):
        data, why = cache.unpack(key_of(path), path.read_bytes())
        assert data is not None, f"{path.name}: {why}"


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_entry_is_rebuilt(cache_root, loaded, damage):
    compile_and_check()
    paths = entries(cache_root)
    assert len(paths) >= 2, "a graph entry and an object entry per kernel"
    good = {p: p.read_bytes() for p in paths}
    for p, blob in good.items():
        p.write_bytes(DAMAGES[damage](blob))
    damaged = [payload(p.read_bytes()) for p in paths]
    loaded.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_and_check()
    reports = [w for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(reports) == len(paths), [str(w.message) for w in reports]  # once per damaged entry
    assert all("discarding bad entry" in str(w.message) for w in reports)
    # never executed: no damaged code reached the JIT (a header-only damage leaves
    # the code itself intact, and the rebuild produces the same bytes)
    intact = {payload(blob) for blob in good.values()}
    assert loaded and all(obj not in damaged or obj in intact for obj in loaded)
    assert entries(cache_root) == paths
    assert_all_good(cache_root)
    # the rebuilt entries now answer, without a warning and without LLVM
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        compile_and_check()


def test_another_graphs_entries_under_this_key(cache_root, loaded):
    compile_and_check(GRAPH)
    mine = entries(cache_root)
    compile_and_check(OTHER)
    theirs = [p for p in entries(cache_root) if p not in mine]  # kernels both graphs hold are shared
    is_graph = lambda p: p.name.startswith("graph-")  # noqa: E731
    assert sum(map(is_graph, mine)) == sum(map(is_graph, theirs)) == 1 and len(theirs) >= 2
    pairs = [(m, t) for m in mine for t in theirs if is_graph(m) and is_graph(t)]
    pairs += zip([m for m in mine if not is_graph(m)], [t for t in theirs if not is_graph(t)])
    for m, t in pairs:
        m.write_bytes(t.read_bytes())  # their graph entry or object, my key
    foreign = [payload(t.read_bytes()) for t in theirs]
    loaded.clear()
    with pytest.warns(cache.CacheWarning, match="the entry of another key"):
        compile_and_check(GRAPH)
    assert not any(obj in foreign for obj in loaded)
    assert_all_good(cache_root)


def test_unchanged_entries_are_reused_without_llvm(cache_root, monkeypatch):
    compile_and_check()
    monkeypatch.setattr(cpu, "compile_units", lambda *a, **k: pytest.fail("compiled again despite a good entry"))
    monkeypatch.setattr(cpu, "compile_object", lambda *a: pytest.fail("compiled again despite a good entry"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        compile_and_check()


def test_host_cpu_is_part_of_the_graph_key(cache_root, monkeypatch):
    compile_and_check()
    first = entries(cache_root)
    monkeypatch.setattr(cpu, "host_key", lambda: "x86_64-unknown-linux-gnu|znver3|+avx2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)  # the old entries are not even read
        compile_and_check()
    graph_entries = [p for p in entries(cache_root) if p.name.startswith("graph-")]
    assert len(graph_entries) == 2 and len(entries(cache_root)) == 2 * len(first)


# --- the folder ----------------------------------------------------------------------


def test_new_folder_is_private(tmp_path, monkeypatch):
    root = tmp_path / "deep" / "cache"
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(root))
    monkeypatch.setattr(api, "_MEMORY_CACHE", OrderedDict())
    compile_and_check()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for path in entries(root):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_folder_writable_by_others_is_refused(cache_root):
    cache_root.mkdir()
    cache_root.chmod(0o777)
    with pytest.warns(cache.CacheWarning, match="writable by group or others"):
        compile_and_check()
    assert entries(cache_root) == []  # compiled uncached
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        compile_and_check()  # still works, and warns no more (once per folder)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_folder_of_another_user_is_refused(cache_root):
    cache_root.mkdir(mode=0o700)
    os.chown(cache_root, 12345, -1)
    with pytest.warns(cache.CacheWarning, match="owned by uid 12345"):
        compile_and_check()
    assert entries(cache_root) == []


def test_entry_writable_by_others_is_discarded(cache_root, loaded):
    compile_and_check()
    paths = entries(cache_root)
    for p in paths:
        p.chmod(0o666)
    with pytest.warns(cache.CacheWarning, match="writable by group or others"):
        compile_and_check()
    assert entries(cache_root) == paths
    for p in paths:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_entry_of_another_user_is_discarded(cache_root):
    compile_and_check()
    for p in entries(cache_root):
        os.chown(p, 12345, -1)
    with pytest.warns(cache.CacheWarning, match="owned by uid 12345"):
        compile_and_check()
    assert all(p.stat().st_uid == os.getuid() for p in entries(cache_root))


def test_symlinked_entry_is_discarded(cache_root, tmp_path):
    compile_and_check()
    for p in entries(cache_root):
        target = tmp_path / (p.name + ".elsewhere")
        target.write_bytes(p.read_bytes())
        p.unlink()
        p.symlink_to(target)
    with pytest.warns(cache.CacheWarning, match="cannot be read"):
        compile_and_check()
    assert not any(p.is_symlink() for p in cache_root.rglob("*"))


@pytest.mark.parametrize("value", ["off", "OFF", "Off", " off ", "0"])
def test_cache_off_in_any_case(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFUSE_CACHE_DIR", value)
    monkeypatch.setattr(api, "_MEMORY_CACHE", OrderedDict())
    assert cache.cache_dir() is None
    compile_and_check()
    assert list(tmp_path.iterdir()) == []  # no folder named OFF


# --- writes --------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_leaves_no_temp_file(cache_root, monkeypatch, failing):
    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    compile_and_check()
    assert entries(cache_root) == []  # folders, but no entry and no temp file


def test_write_into_unwritable_folder_leaves_nothing(cache_root, monkeypatch):
    def no_temp_file(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache.tempfile, "mkstemp", no_temp_file)
    compile_and_check()
    assert entries(cache_root) == []


def test_entry_round_trip_and_checks(cache_root):
    data = b"\x7fELF" + bytes(range(256))
    blob = cache.pack("k1", data)
    assert cache.unpack("k1", blob) == (data, "")
    assert cache.unpack("k2", blob)[1] == "the entry of another key"
    assert cache.unpack("k1", blob[:-1])[1].startswith("payload of")
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    assert cache.unpack("k1", flipped)[1] == "checksum mismatch"
    assert cache.unpack("k1", data)[1] == "not an mlfuse cache entry"


def test_entry_written_in_parts_is_their_join(cache_root):
    parts = [b"\x7fELF", bytes(range(200)), b"", bytes(7)]
    cache.store_object("k1", parts)
    cache.store_object("k2", b"".join(parts))
    assert cache.load_object("k1") == cache.load_object("k2") == b"".join(parts)
    assert [cache.unpack(key_of(p), p.read_bytes()) for p in entries(cache_root)] == [(b"".join(parts), "")] * 2


# --- the in-memory cache -------------------------------------------------------------


def test_memory_cache_is_a_bounded_lru(monkeypatch):
    monkeypatch.setattr(api, "_MEMORY_CACHE", OrderedDict())
    monkeypatch.setattr(api, "MEMORY_CACHE_SIZE", 3)
    for key in "abc":
        api._memory_put(key, object())
    assert api._memory_get("a") is not None  # now the most recent
    api._memory_put("d", object())
    assert list(api._MEMORY_CACHE) == ["c", "a", "d"]
    assert api._memory_get("b") is None
