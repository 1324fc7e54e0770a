"""Shard files of the raw-vector store: ``<kind>-<id>.npz``, an uncompressed zip of ``.npy`` members (what
``np.savez`` writes), written whole or not at all and checked on read.

Members: ``keys`` (n, 32) uint8, ``offsets`` (n + 1,) int64 (entry ``i`` is rows ``offsets[i]:offsets[i+1]``
of ``data``), ``data`` (rows, dim), ``ndim`` (1,) (1: one row per entry, a sentence or span vector;
2: a block of rows, a text's token vectors) and ``digest``, the SHA-256 of the first three. Because the zip
stores its members uncompressed, ``data`` lies at a fixed offset of the file (:func:`locate`): the store
reads the rows it needs in place (a memory map), never the whole shard, and checks each entry against the
CRC-32 of its rows recorded in the index (:func:`entry_crcs`) when the shard was written or first indexed.

``data`` holds float32, unless the vectors came out of a 16-bit forward pass (:data:`STORAGES`): a model run in
float16 keeps them as float16, one run in bfloat16 as uint16 (the upper half of each float32, which is all of a
bfloat16; numpy has no bfloat16 of its own). Half the bytes and nothing lost: a chunk is written in 16 bits only
when every value goes back to the very same float32 (:func:`narrow`), else in float32 as always (span vectors,
averaged in float32 from a 16-bit model's token vectors, are not 16-bit numbers). Readers always get float32.

Example:
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "sentence-x.npz"
    >>> info = write_shard(p, [bytes(32)], [np.ones(4, np.float32)])
    >>> info.rows, info.dim, info.ndim, read_rows(p, info, np.array([0]), np.array([1]))[0].tolist()
    (1, 4, 1, [[1.0, 1.0, 1.0, 1.0]])
"""

from __future__ import annotations

import hashlib
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iso_bench.faults import fault_point
from iso_bench.files import replacing
from iso_bench.registry import IsoBenchError


class CacheCorruptError(IsoBenchError, RuntimeError):
    """A shard failed its checksum or could not be parsed."""


FLOAT32 = "float32"
STORAGES = {FLOAT32: np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": np.dtype(np.uint16)}
"""What a shard's ``data`` holds, by the precision of the forward pass that made its vectors: the numpy dtype of
the member (bfloat16 as the uint16 upper halves of float32 values)."""
_BY_DTYPE = {dtype: name for name, dtype in STORAGES.items()}


@dataclass(frozen=True)
class ShardInfo:
    """Where a shard's entries are: ``keys`` (32 bytes each), ``offsets`` into its ``rows`` of ``dim``
    values that start at byte ``data_offset`` of the file, each entry's CRC-32 (``crcs``), ``ndim`` (1: an
    entry is one vector; 2: a block of rows) and ``storage``, what the values are kept in (:data:`STORAGES`)."""

    keys: list[bytes]
    offsets: np.ndarray
    crcs: list[int]
    data_offset: int
    rows: int
    dim: int
    ndim: int
    storage: str = FLOAT32


def narrow(data: np.ndarray, storage: str | None) -> tuple[np.ndarray, str]:
    """``(the float32 matrix data as stored, its storage)``: in ``storage`` (``"float16"`` or ``"bfloat16"``) when
    every value goes back to the same float32 bits, else float32 itself (nothing is ever rounded).

    >>> narrow(np.array([[1.5, -2.0]], np.float32), "bfloat16")[0].tolist(), narrow(np.array([[0.1]], np.float32),
    ...                                                                               "bfloat16")[1]
    ([[16320, 49152]], 'float32')
    """
    if storage in (None, FLOAT32) or not data.size:
        return data, FLOAT32
    bits = data.view(np.uint32)
    if storage == "bfloat16":
        if not (bits & 0xFFFF).any():
            return (bits >> 16).astype(np.uint16), storage
        return data, FLOAT32
    if storage != "float16":
        raise ValueError(f"unknown storage {storage!r}; choose one of {', '.join(STORAGES)}")
    with np.errstate(over="ignore"):  # a value beyond float16's range: not kept in float16
        half = data.astype(np.float16)
    if np.array_equal(half.astype(np.float32).view(np.uint32), bits):
        return half, storage
    return data, FLOAT32


def widen(stored: np.ndarray) -> np.ndarray:
    """The float32 values of rows as a shard stores them (:func:`narrow`'s inverse, exact)."""
    if stored.dtype == np.uint16:
        return (stored.astype(np.uint32) << 16).view(np.float32)
    return stored if stored.dtype == np.float32 else stored.astype(np.float32)


def as_stored(rows: np.ndarray, storage: str) -> np.ndarray:
    """Float32 ``rows`` in a shard's ``storage`` (:data:`STORAGES`), bytes as :func:`narrow` stores them: for rows
    of a chunk that :func:`narrow` kept in that storage, exact.

    >>> as_stored(np.array([[1.5]], np.float32), "bfloat16").tolist()
    [[16320]]
    """
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if storage == "bfloat16":
        return (rows.view(np.uint32) >> 16).astype(np.uint16)
    return rows.astype(np.float16) if storage == "float16" else rows


def run_within(rows: np.ndarray, block: np.ndarray) -> int | None:
    """Where ``rows`` lie, byte for byte, as a contiguous run of ``block``'s rows (the first such row; one after
    the first row before the others: a text's token vectors inside the rows its pooling reads, the special token
    first), or None (an empty ``rows`` too: nothing to refer to).

    >>> block = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> run_within(block[1:3].copy(), block), run_within(block[::-1].copy(), block)
    (1, None)
    """
    n, total = len(rows), len(block)
    if not n or n > total or rows.shape[1:] != block.shape[1:] or rows.dtype != block.dtype or rows.ndim != 2:
        return None
    bits, within = np.ascontiguousarray(rows).view(np.uint32), np.ascontiguousarray(block).view(np.uint32)
    for j in dict.fromkeys([1, 0, *range(2, total - n + 1)]):
        if j <= total - n and np.array_equal(within[j], bits[0]) and np.array_equal(within[j:j + n], bits):
            return j
    return None


def _digest(keys: np.ndarray, offsets: np.ndarray, *data: np.ndarray) -> np.ndarray:
    """SHA-256 of a shard's keys, offsets and data, the data whole or as its entries' rows in order (the same bytes)."""
    h = hashlib.sha256()
    for arr in (keys, offsets, *data):
        h.update(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))  # the bytes in place, not a copy
    return np.frombuffer(h.digest(), dtype=np.uint8)


def entry_crcs(data: np.ndarray, offsets: np.ndarray) -> list[int]:
    """The CRC-32 of each entry's rows as stored (the check made when the entry is read in place)."""
    view = np.ascontiguousarray(data)
    return [zlib.crc32(view[a:b]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]


def write_shard(path: Path, keys: list[bytes], arrays: list[np.ndarray], storage: str | None = None) -> ShardInfo:
    """Write vectors (each ``(dim,)`` or ``(n_i, dim)``) atomically with a checksum; returns where they are.
    ``storage``: the precision of the forward pass that made them (``"float16"``, ``"bfloat16"``; None: float32),
    kept where nothing is lost (:func:`narrow`).

    The file is what ``np.savez`` writes (an uncompressed zip of ``.npy`` members), streamed into its
    temporary file member by member: no second copy of a shard that may be 100s of MB is made in memory."""
    dim = arrays[0].shape[-1]
    rows = [np.ascontiguousarray(a, dtype=np.float32).reshape(-1, dim) for a in arrays]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    stored, kept = _narrow_rows(rows, storage)
    key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
    header = np.lib.format.header_data_from_array_1_0(np.empty((0, dim), stored[0].dtype if stored else np.float32))
    header["shape"] = (int(offsets[-1]), dim)  # the header np.save writes for the rows stacked
    members = {"keys": key_arr, "offsets": offsets, "data": None, "ndim": np.array([arrays[0].ndim], dtype=np.int64),
               "digest": _digest(key_arr, offsets, *stored)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, array in members.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    if array is not None:
                        np.lib.format.write_array(member, array, allow_pickle=False)
                        continue
                    np.lib.format.write_array_header_1_0(member, header)  # then the rows, never stacked in memory
                    for block in stored:
                        member.write(block.reshape(-1).view(np.uint8))
                if name == "data":  # the vectors are in the temporary file, its checksum and directory are not
                    archive.fp.flush()
                    fault_point("shard-write")
        data_offset = locate(tmp)[0]
    return ShardInfo(list(keys), offsets, [zlib.crc32(block) for block in stored], data_offset, int(offsets[-1]), dim,
                     int(arrays[0].ndim), kept)


def _narrow_rows(rows: list[np.ndarray], storage: str | None) -> tuple[list[np.ndarray], str]:
    """Each entry's rows as stored, and the storage: :func:`narrow` of the rows stacked, entry by entry (16-bit
    only where every value of every entry keeps its float32 bits)."""
    if storage in (None, FLOAT32) or not any(r.size for r in rows):
        return rows, FLOAT32
    narrowed = [narrow(r, storage) if r.size else (as_stored(r, storage), storage) for r in rows]
    if all(kept == storage for _, kept in narrowed):
        return [r for r, _ in narrowed], storage
    return rows, FLOAT32


def locate(path: Path) -> tuple[int, tuple[int, ...], str]:
    """``(byte offset, shape, storage)`` of the ``data`` member's array in a shard file: the start of its
    ``.npy`` payload inside the (uncompressed) zip, and what it holds (:data:`STORAGES`). Raises
    :class:`CacheCorruptError` when the file is not such a shard."""
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("data.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError("data.npy is compressed")
        with open(path, "rb") as f:
            f.seek(info.header_offset)
            header = f.read(30)
            if header[:4] != b"PK\x03\x04":
                raise ValueError("no local file header")
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            f.seek(info.header_offset + 30 + name_len + extra_len)
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if dtype not in _BY_DTYPE or fortran or len(shape) != 2:
                raise ValueError(f"data.npy is {dtype} {shape}")
            return f.tell(), shape, _BY_DTYPE[dtype]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, struct.error) as exc:
        raise CacheCorruptError(f"{path}: unreadable ({exc})") from exc


def read_shard(path: Path) -> dict[bytes, np.ndarray]:
    """Read a whole shard and verify its SHA-256; raises :class:`CacheCorruptError` when it is damaged."""
    keys, offsets, data, ndim = _read_verified(path)
    data = widen(data)
    one = ndim == 1
    out = {}
    for i in range(len(keys)):
        block = data[offsets[i] : offsets[i + 1]]
        out[keys[i].tobytes()] = block[0] if one else block
    return out


def index_shard(path: Path) -> ShardInfo:
    """What the index records of a shard found on disk (an older cache's, or one whose writer died before
    indexing it): read whole and verified once, never trusted blindly."""
    keys, offsets, data, ndim = _read_verified(path)
    data_offset, shape, storage = locate(path)
    if tuple(shape) != data.shape or STORAGES[storage] != data.dtype:
        raise CacheCorruptError(f"{path}: inconsistent data member")
    return ShardInfo([k.tobytes() for k in keys], offsets, entry_crcs(data, offsets), data_offset, len(data),
                     data.shape[1], ndim, storage)


def _read_verified(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys, offsets, data, ndim, digest = (z[k] for k in ("keys", "offsets", "data", "ndim", "digest"))
    except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged file
        raise CacheCorruptError(f"{path}: unreadable ({exc})") from exc
    if not np.array_equal(_digest(keys, offsets, data), digest):
        raise CacheCorruptError(f"{path}: checksum mismatch")
    if len(offsets) != len(keys) + 1 or offsets[-1] != len(data):
        raise CacheCorruptError(f"{path}: inconsistent offsets")
    return keys, offsets, data, int(ndim[0])


Where = ShardInfo | tuple[int, int, int] | tuple[int, int, int, str]
"""Where a shard's data is: its :class:`ShardInfo`, or ``(data_offset, rows, dim)`` of float32 values, or
``(data_offset, rows, dim, storage)`` (what the index records)."""


def _mapped(path: Path, info: Where) -> np.memmap:
    """The shard's data as stored, memory-mapped."""
    if isinstance(info, ShardInfo):
        info = (info.data_offset, info.rows, info.dim, info.storage)
    offset, rows, dim, storage = (*info, FLOAT32)[:4]
    try:
        return np.memmap(path, dtype=STORAGES[storage or FLOAT32], mode="r", offset=offset, shape=(rows, dim))
    except (OSError, ValueError) as exc:  # a file cut short: mmap length beyond its end
        raise CacheCorruptError(f"{path}: unreadable ({exc})") from exc


def read_rows(path: Path, info: Where, starts: np.ndarray, stops: np.ndarray,
              crcs: list[int] | None = None) -> list[np.ndarray]:
    """The rows ``starts[i]:stops[i]`` of a shard's data as float32, read in place (a memory map: only those
    pages are read), each checked against ``crcs[i]`` when given. ``info``: where the data is (:data:`Where`).
    Raises :class:`CacheCorruptError` when the file is shorter than recorded or an entry's CRC differs (the
    shard was damaged after it was indexed)."""
    data = _mapped(path, info).view(np.ndarray)  # the mapped bytes, sliced without np.memmap's bookkeeping
    try:
        out = [data[a:b].copy() for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]
    finally:
        del data
    if crcs is not None:
        for block, crc in zip(out, crcs, strict=True):
            if zlib.crc32(block) != crc:
                raise CacheCorruptError(f"{path}: checksum mismatch of an entry")
    return [widen(block) for block in out]


def read_vectors(path: Path, info: Where, rows: np.ndarray, crcs: list[int] | None = None) -> np.ndarray:
    """The single-row entries at ``rows`` of a shard's data as one float32 ``(len(rows), dim)`` matrix, read in
    place and checked against ``crcs`` as :func:`read_rows` does: no per-entry array for a large request."""
    data = _mapped(path, info)
    try:
        out = np.asarray(data[np.asarray(rows, dtype=np.int64)])
    finally:
        del data
    if crcs is not None and any(zlib.crc32(row) != crc for row, crc in zip(out, crcs, strict=True)):
        raise CacheCorruptError(f"{path}: checksum mismatch of an entry")
    return widen(out)
