"""The per-instance units beside a result, ``<Task>.instances.npz``: written (:func:`write_units_file`), read back
for a bootstrap (:func:`load_units`), each group's units in the fewest bytes that give back the same float64
values, bit for bit.

The file (``np.savez``, no pickled objects) holds, per (split, subset) group ``<split>/<subset>`` (its key): the
units, float64 (n, k) as :func:`pack` stores them, ``<key>/statistic`` (0-d str), ``<key>/main_score`` (float64:
the main score the units give) and, where resampling keeps subsets apart, ``<key>/strata`` (the subset of each
unit: integers (n,) in the narrowest unsigned type that holds them, read back as int64) with
``<key>/strata_names`` (str (S,)). The score entry's record names the file, its SHA-256 and the group
(:func:`iso_bench.results.instances.write_instances`).

A result's units (:mod:`iso_bench.results.instances`) are float64, but most of their columns carry less than
that: mteb's STS similarities are float32 values widened, gold scores take a few hundred distinct values, a
classification's per-example correctness a handful. :func:`pack` stores each column of a float64 units array
in the smallest exact form: float32 where every value comes back bit for bit, else its distinct values (by
their bits: ``-0.0`` and ``0.0`` stay apart) with a uint8 or uint16 index into them where that is smaller, else
float64. :func:`unpack` rebuilds the array, bit for bit. An array that nothing narrows is stored as before,
under ``<key>/units`` (files written before the packing hold only that form): both read the same.

The packed form of ``<key>/units`` is ``<key>/units.shape`` (the array's shape) and, per column ``j``, either
``<key>/units.j`` (float32 or float64) or ``<key>/units.j.values`` and ``<key>/units.j.index``. The choice
depends on the values alone, so the same units give the same bytes on every host (no compressor is involved).

Example:
    >>> import numpy as np
    >>> units = np.array([[0.25, 0.2], [0.5, 0.2], [1 / 3, 0.8]])
    >>> packed = pack("test/default/units", units)
    >>> sorted((name.rsplit("/", 1)[1], str(a.dtype)) for name, a in packed.items())
    [('units.0', 'float64'), ('units.1.index', 'uint8'), ('units.1.values', 'float64'), ('units.shape', 'int64')]
    >>> unpack(packed, "test/default/units").tobytes() == units.tobytes()
    True
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.files import atomic_write_bytes
from iso_bench.numerics.stats import statistic_of
from iso_bench.results.result_files import InstancesError

SUFFIX = "/units"
"""The name of a group's units in a units file: ``<key>/units``."""
STRATA = "/strata"
"""The name of a group's strata (the subset of each unit): ``<key>/strata``."""


def pack(name: str, array: Any) -> dict[str, np.ndarray]:
    """``{stored name: array}`` for the units ``array`` named ``name`` (``<key>/units``): the packed form where it
    is smaller, else ``{name: array}`` unchanged (any array that is not float64 of 1 or 2 dimensions, too)."""
    a = np.asarray(array)
    if a.dtype != np.float64 or a.ndim not in (1, 2) or a.size == 0:
        return {name: a}
    columns = a.reshape(a.shape[0], -1)
    parts: dict[str, np.ndarray] = {f"{name}.shape": np.array(a.shape, dtype=np.int64)}
    narrowed = False
    for j in range(columns.shape[1]):
        form = _narrowest(f"{name}.{j}", np.ascontiguousarray(columns[:, j]))
        narrowed |= f"{name}.{j}" not in form or form[f"{name}.{j}"].dtype != np.float64  # not the column as given
        parts.update(form)
    return parts if narrowed else {name: a}


def pack_groups(arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A units file's ``arrays`` (name -> array) with every group's units (``<key>/units``) :func:`pack`-ed and
    its strata (``<key>/strata``, subset numbers) in the narrowest unsigned integers that hold them."""
    out: dict[str, np.ndarray] = {}
    for name, array in arrays.items():
        if name.endswith(SUFFIX):
            out.update(pack(name, array))
        elif name.endswith(STRATA):
            out[name] = narrow_strata(array)
        else:
            out[name] = array
    return out


def narrow_strata(array: Any) -> np.ndarray:
    """Subset numbers as uint8 or uint16 where they fit (read back as int64 by :func:`strata_of`)."""
    a = np.asarray(array)
    if a.dtype.kind not in "iu" or a.size == 0 or a.min() < 0 or a.max() > np.iinfo(np.uint16).max:
        return a
    return a.astype(np.uint8 if a.max() <= np.iinfo(np.uint8).max else np.uint16)


def strata_of(arrays: Mapping[str, Any], key: str) -> np.ndarray | None:
    """A group's strata as int64, in whichever width they were stored; ``None`` where it has none."""
    name = f"{key}{STRATA}"
    return np.asarray(arrays[name]).astype(np.int64) if name in arrays else None


def _narrowest(name: str, column: np.ndarray) -> dict[str, np.ndarray]:
    """The smallest exact form of one float64 column: float64, float32, or distinct values and an index."""
    options = [{name: column}]
    with np.errstate(over="ignore", invalid="ignore"):
        single = column.astype(np.float32)
    if np.array_equal(single.astype(np.float64).view(np.uint64), column.view(np.uint64)):
        options.append({name: single})
    bits, index = np.unique(column.view(np.uint64), return_inverse=True)
    if len(bits) <= 1 << 16:
        small = np.uint8 if len(bits) <= 1 << 8 else np.uint16
        options.append({f"{name}.values": bits.view(np.float64), f"{name}.index": index.reshape(-1).astype(small)})
    return min(options, key=lambda form: sum(a.nbytes for a in form.values()))  # the first of equal sizes


def unpack(arrays: Mapping[str, Any], name: str) -> np.ndarray | None:
    """The units ``name`` (``<key>/units``) from a units file's arrays (an ``np.load`` of it, or a mapping), as
    written (float64, bit for bit, where they were packed); ``None`` where they hold neither form. Raises
    ``ValueError`` naming what is missing or malformed."""
    if name in arrays:
        return np.asarray(arrays[name])
    if f"{name}.shape" not in arrays:
        return None
    shape = tuple(int(n) for n in np.asarray(arrays[f"{name}.shape"]).reshape(-1))
    if len(shape) not in (1, 2) or min(shape) < 0:
        raise ValueError(f"{name}: a packed shape of {shape}, not (n,) or (n, k)")
    columns = []
    for j in range(1 if len(shape) == 1 else shape[1]):
        if f"{name}.{j}" in arrays:
            column = np.asarray(arrays[f"{name}.{j}"]).astype(np.float64)
        elif f"{name}.{j}.values" in arrays and f"{name}.{j}.index" in arrays:
            values, index = np.asarray(arrays[f"{name}.{j}.values"]), np.asarray(arrays[f"{name}.{j}.index"])
            if values.dtype != np.float64 or index.dtype.kind != "u" or (index.size and index.max() >= len(values)):
                raise ValueError(f"{name}: column {j}'s distinct values and index do not fit together")
            column = values[index]
        else:
            raise ValueError(f"{name}: column {j} of {shape} is missing")
        if column.shape != shape[:1]:
            raise ValueError(f"{name}: column {j} has {column.shape[0]} values where its shape says {shape[0]}")
        columns.append(column)
    return np.stack(columns, axis=1).reshape(shape)


def write_units_file(target: Path, arrays: Mapping[str, Any], kept: list[dict[str, Any]]) -> str | None:
    """Write the groups ``arrays`` (name -> array) to ``target`` through a temporary file and a rename, with
    the groups of the file there now that ``kept`` (the ``instances`` records of entries merged from an
    earlier run) point to, when it is the file they were written with; a record whose file is gone or
    changed is turned into a reason instead. Returns the SHA-256 of the bytes written, which every record in
    ``kept`` then carries; ``None`` when there is nothing to write (and nothing is kept: ``target`` is removed)."""
    data = target.read_bytes() if kept and target.is_file() else b""
    old = np.load(io.BytesIO(data), allow_pickle=False) if data else None
    old_sha = hashlib.sha256(data).hexdigest() if data else None
    carried: dict[str, Any] = {}
    for info in kept:
        names = [n for n in old.files if n.startswith(f"{info.get('key')}/")] if (
            old is not None and info.get("sha256") == old_sha) else []
        carried.update({n: old[n] for n in names})
        if not names:
            info.clear()
            info.update(file=None, reason=f"{target.name}, written with this score, was missing or changed when "
                                          "the task was evaluated again")
    arrays = {**carried, **pack_groups(arrays)}  # each group's units in their smallest exact form
    if not arrays:  # no entry keeps units (every kept record was turned into a reason above)
        target.unlink(missing_ok=True)
        return None
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    sha = hashlib.sha256(buffer.getvalue()).hexdigest()
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, buffer.getvalue())
    for info in kept:
        if info.get("file"):
            info["sha256"] = sha
    return sha


def load_units(result_json_path: str | Path, record: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """``(units, statistic, strata)`` of a score entry, from the file its ``iso_bench`` record (or that
    record's ``instances``) names beside ``result_json_path``: the units (float64, one row per instance), the
    statistic as :func:`iso_bench.numerics.stats.confidence_interval` takes it (a name, or a function for
    :data:`iso_bench.numerics.stats.CUSTOM` ones) and the strata (``None`` where there are none). Raises
    :class:`InstancesError` naming the file when none was kept, when it is missing, or when its SHA-256 is
    not the recorded one.

    Example:
        >>> units, statistic, strata = load_units(path, entry["iso_bench"])              # doctest: +SKIP
    """
    info = record.get("instances", record) if isinstance(record, Mapping) else None
    result = Path(result_json_path)
    if not isinstance(info, Mapping) or not info.get("file"):
        why = info.get("reason") if isinstance(info, Mapping) else None
        raise InstancesError(f"{result}: no per-instance values were kept for this score ({why or 'no record'})")
    path = result.parent / info["file"]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InstancesError(f"{path}: the per-instance file recorded in {result.name} is missing; evaluate "
                             "the task again (overwriting its result) to write it") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != info.get("sha256"):
        raise InstancesError(f"{path}: SHA-256 {digest[:12]}... is not the {str(info.get('sha256'))[:12]}... "
                             f"recorded in {result.name}: the file was changed or belongs to another run")
    key = info["key"]
    with np.load(io.BytesIO(data), allow_pickle=False) as found:
        try:
            units = unpack(found, f"{key}/units")
        except ValueError as exc:  # a packed group garbled
            raise InstancesError(f"{path}: group {key!r} (recorded in {result.name}) is malformed: {exc}") from None
        if units is None:
            raise InstancesError(f"{path}: holds no group {key!r} (recorded in {result.name})")
        strata = strata_of(found, key)
        return units, statistic_of(str(found[f"{key}/statistic"])), strata


__all__ = ["STRATA", "SUFFIX", "load_units", "narrow_strata", "pack", "pack_groups", "strata_of", "unpack",
           "write_units_file"]
