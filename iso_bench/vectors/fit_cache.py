"""Fitted methods on disk, so that a rerun fits nothing: the raw-vector cache's counterpart for fits.

A fit is determined by the raw vectors it reads and by how the method learns from them. Its file lies in the
raw-vector namespace it was fitted from (``<cache>/<model>/<revision>/<extraction>/fits/``; see
:mod:`iso_bench.vectors.store`), named by the SHA-256 of its key (:func:`fit_key`):

- the fit corpus: its identity and record (``texts_sha256``, the sample and its seed), and each group's
  prompt type, resolved prompt and texts digest (the prompt is part of every raw vector's key);
- the method: its class, every parameter (the seed among them) and the level it is fitted at;
- the code that fits it: a digest of the sources of :mod:`iso_bench.methods` and :mod:`iso_bench.numerics.linalg`,
  and the versions of numpy, scipy, scikit-learn and torch. A changed method, a new default or another
  library version makes a new key, never a stale hit;
- the kernel class the fit runs on (:mod:`iso_bench.kernels`): fits of two classes are other bits.

A file is an ``.npz`` without pickle: the learned state's arrays (``a0``, ``a1``, ...) and ``state``, a JSON
document (bytes) holding the key, the fit record (level, number of fit vectors), the structure of the learned
state (nested lists, tuples, dicts and iso-bench dataclasses of arrays, numbers, strings and None) and the
SHA-256 of the arrays. It is written atomically (:func:`iso_bench.files.replacing`), under a lock that makes a
second process needing the same fit at once wait and load it (:func:`fit_lock`), and checked when read: a
file that does not parse, whose key differs or whose arrays fail their digest is set aside as ``.npz.bad``
with a warning, and the method is fitted again. A method whose learned state holds anything else (a plugin's
own objects) is not stored; it is fitted as before.

Example:
    >>> import tempfile, numpy as np
    >>> from iso_bench.methods import make_method
    >>> folder = Path(tempfile.mkdtemp())
    >>> m = make_method("abtt-2")[0].fit(np.random.default_rng(0).normal(size=(50, 4)))
    >>> save_fit(folder / "f.npz", {"k": 1}, m, {"level": "sentence", "n_vectors": 50})
    True
    >>> loaded, record = load_fit(folder / "f.npz", {"k": 1}, make_method("abtt-2")[0])
    >>> bool(np.array_equal(loaded.components_, m.components_)), record["n_vectors"]
    (True, 50)
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

import iso_bench.methods
import iso_bench.numerics.linalg
from iso_bench.files import atomic_write_bytes

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; two runs may then fit the same method twice, both correct
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

FORMAT = 2
"""The layout of a fit file; a new layout makes new keys. 2: fits saved by an export of an earlier version were
not fitted under one BLAS thread, as a run's are, so they are never reused."""
FOLDER = "fits"
"""The fits' folder inside a raw-vector namespace."""


class FitFileError(Exception):
    """A fit file that cannot be used: it does not parse, belongs to another key or fails its digest."""


class NotStorable(Exception):
    """The learned state holds a value this format does not store (it is then not cached)."""


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 over the sources of :mod:`iso_bench.methods` and :mod:`iso_bench.numerics.linalg` and the versions of the
    numerical libraries that fits run on: any change to how a method learns gives fits new keys."""

    h = hashlib.sha256()
    package = Path(iso_bench.methods.__file__).parent
    for path in [*sorted(package.glob("*.py")), Path(iso_bench.numerics.linalg.__file__)]:
        h.update(path.name.encode() + b"\x00" + path.read_bytes() + b"\x00")
    for dist in ("numpy", "scipy", "scikit-learn", "torch"):
        try:
            h.update(f"{dist}={version(dist)}\n".encode())
        except PackageNotFoundError:
            h.update(f"{dist}=none\n".encode())
    return h.hexdigest()


def fit_key(*, namespace: str, corpus: dict[str, Any], groups: list[dict[str, Any]], method: Any,
            level: str, kernels: str | None = None, calibration: str | None = None) -> dict[str, Any]:
    """Everything a fit depends on, as a JSON-able dict (see the module docstring). ``kernels``: the kernel
    class the fit runs on (:func:`iso_bench.kernels.fit_kernels`; None, left out of the key, for the class the
    keys written before classes were named belong to). ``calibration``: what a storage stage calibrates on where
    it is not the method's own fit vectors (``"pooled"``: a token-level int8 stage's pooled sentence vectors; a
    fit of the same method on the same token vectors without those ranges is another fit)."""
    key = {"format": FORMAT, "namespace": namespace, "corpus": corpus, "groups": groups,
           "method": type(method).__name__, "params": jsonable(method.get_params()), "level": level,
           "code": code_digest()}
    key = key if kernels is None else {**key, "kernels": kernels}
    return key if calibration is None else {**key, "calibration": calibration}


def key_name(key: dict[str, Any]) -> str:
    """The file name of a key: ``<sha256>.npz``."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".npz"


def learned_state(method: Any) -> dict[str, Any]:
    """The learned attributes of a fitted method: names ending in ``_``, not starting with one."""
    return {k: v for k, v in vars(method).items() if k.endswith("_") and not k.startswith("_")}


def save_fit(path: Path, key: dict[str, Any], method: Any, record: dict[str, Any]) -> bool:
    """Write the fitted ``method`` under ``key`` atomically; False (nothing written) when its state is not
    storable."""
    try:
        tree, arrays = pack_state(method)
    except NotStorable as exc:
        logger.debug("fit of %s not cached: %s", type(method).__name__, exc)
        return False
    state = {"key": key, "record": record, "state": tree, "sha256": _arrays_digest(arrays)}
    arrays["state"] = np.frombuffer(json.dumps(state, sort_keys=True).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getbuffer())
    return True


def load_fit(path: Path, key: dict[str, Any], method: Any) -> tuple[Any, dict[str, Any]]:
    """Set the learned state stored in ``path`` on ``method`` (a fresh instance of the right spec); returns
    it and the fit record. Raises :class:`FitFileError` when the file cannot be used."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        state = json.loads(arrays.pop("state").tobytes().decode())
    except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged file
        raise FitFileError(f"{path}: unreadable ({exc})") from exc
    if state.get("key") != json.loads(json.dumps(key)):
        raise FitFileError(f"{path}: holds the fit of another key")
    if state.get("sha256") != _arrays_digest(arrays):
        raise FitFileError(f"{path}: checksum mismatch")
    try:
        unpack_state(method, state["state"], arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise FitFileError(f"{path}: malformed state ({exc})") from exc
    return method, state["record"]


def pack_state(method: Any, *, named: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The learned state of a fitted method as ``(tree, arrays)``: a JSON-able structure and the arrays it points
    to, the format of a fit file. ``named=True`` names each array by its place (``mean_``, ``blocks_.0.1.w``)
    rather than ``a0``, ``a1``, ...: readable in any npz reader. Raises :class:`NotStorable`."""
    arrays: dict[str, np.ndarray] = {}
    return _encode(learned_state(method), arrays, "" if named else None), arrays


def unpack_state(method: Any, tree: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """Set the learned state that :func:`pack_state` gave on ``method`` (a fresh instance of its spec); returns
    it. Raises KeyError, TypeError or ValueError on a malformed tree."""
    for name, value in _decode(tree, arrays).items():
        setattr(method, name, value)
    return method


@contextmanager
def fit_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the fit file ``path`` (``<sha256>.lock`` beside it, an advisory ``fcntl.flock``) for the
    block: the look-up, the fit and its write. Two processes that need the same fit at once (two identical runs
    sharing a cache) take turns: the second waits for the first's fit, then loads it, as the raw vectors are
    shared (:mod:`iso_bench.vectors.store`). The kernel releases a killed holder's lock; the holder removes the
    file as it releases it. Where no lock can be taken (no ``fcntl``, a full or read-only disk) the block runs
    without one: both fit, each correctly."""
    lock = path.with_suffix(".lock")
    handle = None
    while fcntl is not None:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            handle = open(lock, "ab")  # noqa: SIM115 - closed below
        except OSError:
            break
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        with suppress(OSError):
            if os.fstat(handle.fileno()).st_ino == os.stat(lock).st_ino:
                break  # the file still there: the lock is this process's
        handle.close()  # removed by the holder that released it: take the new one
        handle = None
    try:
        yield
    finally:
        if handle is not None:
            with suppress(OSError):
                lock.unlink()  # while still held: whoever opened it before sees it gone and opens the new one
            handle.close()


def find_fit(path: Path, key: dict[str, Any], method: Any) -> tuple[Any, dict[str, Any] | None]:
    """``(method, record)`` of the fit stored in ``path`` (:func:`load_fit`), else ``(None, None)``: none there,
    or a damaged file, which is set aside (:func:`set_aside`)."""
    if path.is_file():
        try:
            return load_fit(path, key, method)
        except FitFileError as exc:
            set_aside(path, exc)
    return None, None


def set_aside(path: Path, problem: Exception) -> None:
    """Report a damaged fit file and rename it ``<name>.npz.bad`` (the method is then fitted again)."""
    logger.warning("damaged fit file set aside, the method is fitted again: %s", problem)
    try:
        path.replace(path.with_suffix(".npz.bad"))
    except FileNotFoundError:
        pass


# ---- the learned state as JSON + arrays -------------------------------------------------------------
def _encode(value: Any, arrays: dict[str, np.ndarray], path: str | None = None) -> Any:
    """``path``: None names the arrays ``a0``, ``a1``, ...; a string names each by its place under it."""

    def at(key: Any) -> str | None:
        return None if path is None else f"{path}.{key}" if path else str(key)

    if value is None or isinstance(value, (bool, str)):
        return {"v": value}
    if isinstance(value, (int, float)) and not isinstance(value, np.generic):
        return {"v": value, "t": type(value).__name__}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise NotStorable(f"an object array ({array.dtype})")
        name = f"a{len(arrays)}" if path is None else path
        arrays[name] = array
        return {"a": name, "scalar": isinstance(value, np.generic)}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_encode(v, arrays, at(i)) for i, v in enumerate(value)]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v, arrays, at(k)) for k, v in value.items()}}
    cls = type(value)
    if dataclasses.is_dataclass(value) and cls.__module__.startswith("iso_bench."):
        fields = {f.name: _encode(getattr(value, f.name), arrays, at(f.name)) for f in dataclasses.fields(value)}
        return {"dataclass": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    raise NotStorable(f"a {type(value).__name__}")


def _decode(node: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    if "a" in node:
        array = arrays[node["a"]]
        return array[()] if node["scalar"] else array
    if "v" in node:
        value = node["v"]
        return {"int": int, "float": float}[node["t"]](value) if "t" in node else value
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays) for v in node["tuple"])
    if "dict" in node:
        return {k: _decode(v, arrays) for k, v in node["dict"].items()}
    if "dataclass" in node:
        module, _, name = node["dataclass"].partition(":")
        if not module.startswith("iso_bench."):  # only iso-bench's own classes are ever built from a file
            raise ValueError(f"class {node['dataclass']} is not iso-bench's")
        cls = getattr(importlib.import_module(module), name)
        return cls(**{k: _decode(v, arrays) for k, v in node["fields"].items()})
    raise ValueError(f"unknown node {sorted(node)}")


def _arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def learned_summary(method: Any) -> dict[str, Any]:
    """Small learned facts worth citing (e.g. the clipped dimensions); never large arrays."""
    out = {}
    for key, value in vars(method).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(value, (int, float, str, bool, np.integer, np.floating)):
            out[key] = jsonable(value)
        elif isinstance(value, (list, tuple)) and len(value) <= 64 and all(
            isinstance(v, (int, np.integer)) for v in value
        ):
            out[key] = [int(v) for v in value]
    return out
