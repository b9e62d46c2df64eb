"""An ONNX file compiled before loads by its bytes (api.source_key), without being imported.

The key covers the file's bytes, every compile option, the compiler and the host CPU:
any change to one of them must miss (and compile what was asked for), a damaged entry
must fall back to a full compile, and a model whose data lives in other files is never
keyed by its own bytes alone. Each test has a cache folder of its own and empty memory.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx extra")

from onnx import ModelProto, TensorProto, helper, numpy_helper  # noqa: E402

import mlfuse  # noqa: E402
from mlfuse import api, cache, pipelines  # noqa: E402


def model(weight_scale: float = 1.0) -> ModelProto:
    """y = relu(x @ w + b), w 64x32 (large enough to be an external constant)."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((64, 32)) * weight_scale).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "source_cache",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def expected(m: ModelProto, x: np.ndarray) -> np.ndarray:
    w, b = (numpy_helper.to_array(t) for t in m.graph.initializer)
    return np.maximum(x @ w + b, 0)


X = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)


@pytest.fixture
def imports(monkeypatch) -> list[str]:
    """The ONNX imports from now on (each one's model name)."""
    seen: list[str] = []
    original = api._import_onnx

    def record(model, name, *args):
        seen.append(name)
        return original(model, name, *args)

    monkeypatch.setattr(api, "_import_onnx", record)
    return seen


def saved(tmp_path: Path, m: ModelProto, name: str = "model.onnx") -> str:
    path = tmp_path / name
    onnx.save(m, str(path))
    return str(path)


def check(fn: api.CompiledFunction, m: ModelProto) -> None:
    (got,) = fn(X)
    np.testing.assert_allclose(got, expected(m, X), rtol=1e-5, atol=1e-5)


def fresh_memory() -> None:
    api._MEMORY_CACHE.clear()


def test_second_compile_loads_without_importing(cache_root, imports, tmp_path):
    m = model()
    path = saved(tmp_path, m)
    check(mlfuse.compile(path), m)
    assert len(imports) == 1 and any(p.name.startswith("source-") for p in cache_root.rglob("*"))
    fresh_memory()  # the disk entry answers
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        check(mlfuse.compile(path), m)
    check(mlfuse.compile(path), m)  # and then memory
    assert len(imports) == 1


def test_memory_answers_with_the_disk_cache_off(monkeypatch, imports, tmp_path):
    monkeypatch.setenv("MLFUSE_CACHE_DIR", "off")
    monkeypatch.setattr(api, "_MEMORY_CACHE", OrderedDict())
    m = model()
    path = saved(tmp_path, m)
    check(mlfuse.compile(path), m)
    check(mlfuse.compile(path), m)
    assert len(imports) == 1


@pytest.mark.parametrize("change", [
    {"fast_math": True}, {"parallel": False}, {"planner": "greedy"}, {"fuse": False},
    {"input_shapes": {"x": (8, 64)}}, {"passes": pipelines.cpu_pipeline(outline_serial=False)},
])
def test_a_changed_option_misses(cache_root, imports, tmp_path, change):
    m = model()
    path = saved(tmp_path, m)
    mlfuse.compile(path)
    fresh_memory()
    check(mlfuse.compile(path, **change), m)
    assert len(imports) == 2


def test_a_changed_byte_misses(cache_root, imports, tmp_path):
    first, second = model(), model(weight_scale=2.0)
    path = saved(tmp_path, first)
    check(mlfuse.compile(path), first)
    data = bytearray(Path(path).read_bytes())
    w = numpy_helper.to_array(first.graph.initializer[0]).tobytes()
    at = bytes(data).index(w[:64])
    data[at + 3] ^= 0x40  # one bit of one weight
    Path(path).write_bytes(bytes(data))
    changed = onnx.load(path)
    check(mlfuse.compile(path), changed)
    assert len(imports) == 2
    saved(tmp_path, second)  # the same path, other weights
    check(mlfuse.compile(path), second)
    assert len(imports) == 3


def test_another_compiler_or_host_misses(cache_root, imports, tmp_path, monkeypatch):
    from mlfuse.backend import cpu

    m = model()
    path = saved(tmp_path, m)
    mlfuse.compile(path)
    fresh_memory()
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "another compiler")
    check(mlfuse.compile(path), m)
    assert len(imports) == 2
    fresh_memory()
    monkeypatch.setattr(cpu, "host_key", lambda: "x86_64-unknown-linux-gnu|znver3|+avx2")
    check(mlfuse.compile(path), m)
    assert len(imports) == 3


@pytest.mark.parametrize("which", ["source-", "graphc-", "constants-"])
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_entry_compiles_again(cache_root, imports, tmp_path, which, damage):
    m = model()
    path = saved(tmp_path, m)
    mlfuse.compile(path)
    [entry] = [p for p in cache_root.rglob("*") if p.name.startswith(which)]
    blob = entry.read_bytes()
    entry.write_bytes(blob[: len(blob) // 2] if damage == "truncated" else np.random.default_rng(1).bytes(len(blob)))
    fresh_memory()
    with pytest.warns(cache.CacheWarning, match="discarding bad entry"):
        check(mlfuse.compile(path), m)
    assert len(imports) == 2
    fresh_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)  # rebuilt: good again
        check(mlfuse.compile(path), m)
    assert len(imports) == 2


def test_a_source_entry_of_another_format_compiles_again(cache_root, imports, tmp_path):
    m = model()
    path = saved(tmp_path, m)
    mlfuse.compile(path)
    [entry] = [p for p in cache_root.rglob("*") if p.name.startswith("source-")]
    key = entry.name[: -len(f".v{cache.FORMAT_VERSION}.o")]
    cache.store_object(key, b'{"graph": 3}')  # valid entry, unknown content
    fresh_memory()
    check(mlfuse.compile(path), m)
    assert len(imports) == 2


def save_external(m: ModelProto, path: Path) -> None:
    """`m` with its weights in weights.bin beside it (m itself unchanged)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    onnx.save_model(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)


def test_external_data_is_not_keyed_by_the_file_alone(cache_root, imports, tmp_path):
    m, other = model(), model(weight_scale=3.0)
    path = tmp_path / "model.onnx"
    save_external(m, path)
    check(mlfuse.compile(str(path)), m)
    assert not any(p.name.startswith("source-") for p in cache_root.rglob("*"))
    save_external(other, path)  # new weights, the same model file
    fresh_memory()
    check(mlfuse.compile(str(path)), other)


def test_keys_differ_by_input_values_and_refuse_objects():
    options = {"fuse": True, "parallel": True, "planner": "ilp", "fast_math": False}
    key = lambda **kw: api.source_key("0" * 64, "cpu", "main", None, options, **kw)  # noqa: E731
    a = key(input_values={"axes": np.array([1], np.int64)})
    assert a is not None and a != key(input_values={"axes": np.array([2], np.int64)})
    assert a != key(input_values={"axes": np.array([1], np.int32)}) != key()
    assert key(input_values={"s": np.array(["a"], dtype=object)}) is None
    assert key(input_shapes={"x": (8, 64)}) != key(input_shapes={"x": (8, 65)})
    assert api.source_key(None, "cpu", "main", None, options) is None


def test_key_while_another_thread_imports_onnx(monkeypatch):
    """A thread's first ONNX compile found onnx half imported by another thread's (in
    sys.modules, without __version__ yet): AttributeError. The key is the same either way."""
    import sys
    import types

    options = {"fuse": True, "parallel": True, "planner": "ilp", "fast_math": False}
    whole = api.source_key("0" * 64, "cpu", "main", None, options)
    monkeypatch.setitem(sys.modules, "onnx", types.ModuleType("onnx"))  # as an import under way leaves it
    assert api.source_key("0" * 64, "cpu", "main", None, options) == whole is not None


def test_unaligned_outputs_from_a_source_entry(cache_root, imports, tmp_path):
    """The variant for 16-byte aligned outputs of a function loaded by its source entry."""
    m = model()
    path = saved(tmp_path, m)
    mlfuse.compile(path)
    fresh_memory()
    fn = mlfuse.compile(path)
    raw = np.empty(8 * 32 * 4 + 64, np.uint8)
    at = next(i for i in range(0, 64, 16) if (raw.ctypes.data + i) % 64)
    out = raw[at : at + 8 * 32 * 4].view(np.float32).reshape(8, 32)
    fn(X, out=[out])
    np.testing.assert_allclose(out, expected(m, X), rtol=1e-5, atol=1e-5)
    assert fn._loose is not None and fn._loose.output_alignment == 16


def test_a_settled_file_loads_without_being_digested(cache_root, imports, tmp_path, monkeypatch):
    """Its sha256 is remembered under its stat (api.file_sha256)."""
    m = model()
    path = saved(tmp_path, m)
    monkeypatch.setattr(api, "SETTLED_SECONDS", 0.0)
    check(mlfuse.compile(path), m)
    assert any(p.name.startswith("digest-") for p in cache_root.rglob("*"))
    fresh_memory()

    def no_digest(*args):
        raise AssertionError("the file was digested again")

    monkeypatch.setattr(api.hashlib, "file_digest", no_digest)
    check(mlfuse.compile(path), m)
    assert len(imports) == 1


def test_a_rewritten_file_is_digested_again(cache_root, imports, tmp_path, monkeypatch):
    """Same size, its modification time put back: the change time still differs."""
    first, second = model(), model(weight_scale=2.0)
    path = saved(tmp_path, first)
    monkeypatch.setattr(api, "SETTLED_SECONDS", 0.0)
    check(mlfuse.compile(path), first)
    before = Path(path).stat()
    saved(tmp_path, second)
    assert Path(path).stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    fresh_memory()
    check(mlfuse.compile(path), second)
    assert len(imports) == 2


def test_a_fresh_file_is_not_remembered(cache_root, imports, tmp_path):
    """Written within SETTLED_SECONDS of its read: a write in the same clock tick could
    leave its stat as it was."""
    m = model()
    check(mlfuse.compile(saved(tmp_path, m)), m)
    assert not any(p.name.startswith("digest-") for p in cache_root.rglob("*"))
