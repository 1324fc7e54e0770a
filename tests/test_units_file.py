"""The per-instance units file: each group's units packed in their smallest exact form and read back bit for
bit, in either layout (packed, or a plain float64 array as files written before the packing hold)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest

from iso_bench.results.result_files import InstancesError
from iso_bench.results.units_file import load_units, pack, unpack, write_units_file

KEY = "test/default/units"


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def test_each_column_takes_its_smallest_exact_form_and_comes_back_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    single = rng.standard_normal(n).astype(np.float32).astype(np.float64)  # float32 values widened: 4 bytes each
    gold = rng.integers(0, 26, n) / 5.0  # 26 distinct values, not float32-exact: 8 x 26 + 1 byte each
    gold[:2] = [0.0, -0.0]  # kept apart by their bits
    wide = rng.standard_normal(n)  # every value distinct and not float32-exact: stays float64
    many = rng.integers(0, 300, n) / 7.0  # 300 distinct: a uint16 index
    units = np.stack([single, gold, wide, many], axis=1)
    packed = pack(KEY, units)
    assert {name: (str(a.dtype), a.shape) for name, a in packed.items()} == {
        f"{KEY}.shape": ("int64", (2,)), f"{KEY}.0": ("float32", (n,)),
        f"{KEY}.1.values": ("float64", (len(np.unique(gold.view(np.uint64))),)), f"{KEY}.1.index": ("uint8", (n,)),
        f"{KEY}.2": ("float64", (n,)),
        f"{KEY}.3.values": ("float64", (len(np.unique(many)),)), f"{KEY}.3.index": ("uint16", (n,))}
    assert len(packed[f"{KEY}.1.values"]) == len(np.unique(gold)) + 1  # -0.0 and 0.0: two values
    back = unpack(packed, KEY)
    assert back.dtype == np.float64 and back.shape == units.shape and _bits(back) == _bits(units)
    assert np.signbit(back[1, 1]) and not np.signbit(back[0, 1])
    for shape_case in (single, single[:, None], gold[:, None]):  # (n,) and (n, 1) keep their shapes
        again = unpack(pack(KEY, shape_case), KEY)
        assert again.shape == shape_case.shape and _bits(again) == _bits(shape_case)


def test_units_nothing_narrows_are_written_as_before_byte_for_byte(tmp_path: Path) -> None:
    """High-entropy float64 units (and arrays that are not units) are stored under their own names, so the file
    is np.savez's of the arrays as given: the layout of every units file written before the packing."""
    units = np.random.default_rng(1).standard_normal((50, 2))
    arrays = {KEY: units, "test/default/statistic": np.array("spearman"), "test/default/main_score": np.array(0.5)}
    target = tmp_path / "STS12.instances.npz"
    sha = write_units_file(target, arrays, [])
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    assert target.read_bytes() == buffer.getvalue() and sha == hashlib.sha256(buffer.getvalue()).hexdigest()


def test_the_reader_gives_the_same_units_from_a_packed_file_and_refuses_a_garbled_one(tmp_path: Path) -> None:
    units = np.stack([np.linspace(0, 1, 40, dtype=np.float32).astype(np.float64), np.arange(40) % 6 / 5], axis=1)
    arrays = {KEY: units, "test/default/statistic": np.array("spearman"), "test/default/main_score": np.array(0.5)}
    target = tmp_path / "STS12.instances.npz"
    sha = write_units_file(target, arrays, [])
    with np.load(target) as stored:
        assert KEY not in stored.files and f"{KEY}.shape" in stored.files  # packed: 5 bytes a unit, not 16
    record = {"file": target.name, "sha256": sha, "key": "test/default"}
    got, statistic, strata = load_units(tmp_path / "STS12.json", record)
    assert _bits(got) == _bits(units) and strata is None and statistic == "spearman"
    garbled = {**pack(KEY, units), f"{KEY}.1.index": np.full(40, 200, np.uint8)}  # points past the 6 values
    buffer = io.BytesIO()
    np.savez(buffer, **garbled, **{k: v for k, v in arrays.items() if k != KEY})
    target.write_bytes(buffer.getvalue())
    record["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    with pytest.raises(InstancesError, match=r"STS12.instances.npz: group 'test/default' .* is malformed: "
                                             r"test/default/units: column 1's distinct values and index"):
        load_units(tmp_path / "STS12.json", record)


def test_published_units_pack_to_the_bytes_derived_by_hand_and_back(v2_results: Path) -> None:
    """A v2 units file of all-MiniLM-L6-v2 on SICK-R (MTEB's STS: float32 cosines, gold in a few hundred values):
    packed, 4 bytes a cosine and 1 a gold score plus the gold's distinct values, and the same float64 back."""
    found = sorted((v2_results / "results").glob("sentence-transformers__all-MiniLM-L6-v2+raw/*/SICK-R.instances.npz"))
    assert len(found) == 1
    with np.load(found[0]) as stored:
        units = stored[KEY]
    packed = pack(KEY, units)
    gold = np.unique(units[:, 1])
    assert len(gold) <= 256  # a uint8 index
    assert sum(a.nbytes for a in packed.values()) == 4 * len(units) + len(units) + 8 * len(gold) + 16
    assert _bits(unpack(packed, KEY)) == _bits(units)


def test_strata_are_kept_in_the_narrowest_unsigned_integers_and_read_back_as_int64(tmp_path: Path) -> None:
    from iso_bench.results.units_file import narrow_strata, strata_of

    strata = np.repeat(np.arange(5, dtype=np.int64), 8)  # 5 subsets of 8 units: one byte each, not eight
    units = np.stack([np.linspace(0, 1, 40), np.arange(40) % 6 / 5], axis=1)
    arrays = {KEY: units, "test/default/statistic": np.array("wmean"), "test/default/main_score": np.array(0.5),
              "test/default/strata": strata, "test/default/strata_names": np.array(list("abcde"))}
    target = tmp_path / "STS12-SentEval.instances.npz"
    sha = write_units_file(target, arrays, [])
    with np.load(target) as stored:
        assert stored["test/default/strata"].dtype == np.uint8
    _, statistic, back = load_units(tmp_path / "STS12-SentEval.json", {"file": target.name, "sha256": sha,
                                                                       "key": "test/default"})
    assert back.dtype == np.int64 and np.array_equal(back, strata) and statistic == "wmean"
    assert narrow_strata(np.arange(300)).dtype == np.uint16
    for kept in (np.array([-1, 0, 1]), np.array([0, 70000]), np.array([0.0, 1.0])):  # not narrowed: as given
        assert narrow_strata(kept).dtype == kept.dtype
    assert strata_of({}, "test/default") is None
