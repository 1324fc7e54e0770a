"""The evaluation units behind a result: ``<Task>.instances.npz`` beside ``<Task>.json``, what a bootstrap
resamples to put an interval around a main score and to compare two variants on the same instances.

A score entry's ``iso_bench`` record names its units: ``"instances": {"file", "sha256", "key", "statistic",
"n_units"}`` (``"file": null`` with a ``"reason"`` where none were kept), and the interval the run computed:
``"interval": {"estimate", "low", "high", "level", "n_resamples", "seed", "method", "n_undefined"}``. The
file (``np.savez``, no pickle) holds per group ``<split>/<subset>``: ``units`` (n rows), ``statistic`` and,
for ``wmean``, ``strata``. Its bytes must match the recorded SHA-256: a units file changed after its run is
refused like a changed result (:class:`UnitsStore`), or marked † with ``accept_modified``. A units file that a
record names but that is not beside its result (a folder copied without them) is refused too: the board's
intervals, paired tests and verdict need it (``ci=False`` renders the scores alone).

A result's units are one :class:`Sample` per subset entry of its split, or the reason there are none (a
string: not written by an iso-bench variant, written before intervals were recorded, no units kept and why, or,
where :meth:`UnitsStore.verify` was not called first, the file missing).

>>> store = UnitsStore()                                          # doctest: +SKIP
>>> results = store.verify(read_results("results"))               # doctest: +SKIP
>>> store.samples(results[0])                                     # doctest: +SKIP
[Sample(statistic='spearman', key='test/default', ...)]
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.numerics.stats import StatsError, Units
from iso_bench.report.marks import SCORE_CHANGED, UNITS_CHANGED
from iso_bench.report.results import LeaderboardError, Result
from iso_bench.results import units_file
from iso_bench.results.result_files import MODIFIED

WRITTEN_BEFORE = "written before intervals were recorded"  # by an iso-bench version that did not record them
NOT_ISO_BENCH = "not written by an iso-bench variant (no iso_bench record)"  # another model's result file
NO_UNITS = "no units recorded"
SCORE_TOLERANCE = 1e-6  # largest |main score the units give - the file's|: files round some main scores to 6 decimals
SHAPES = {"spearman": "(n, 2)", "wmean": "(n, 2)", "mean": "(n,)", "max_ap": "(n, k + 1)"}
GOLD = {"spearman": 1, "wmean": 1, "max_ap": -1, "max_accuracy": -1}  # the column aligned variants share
DEFAULTS = {"n_resamples": 1000, "seed": 0, "level": 0.95}  # of iso_bench.numerics.stats, where a record gives none


@dataclass(frozen=True)
class Design:
    """How a result's interval is drawn: resamples, the seed of their indices, the confidence level."""

    n_resamples: int = DEFAULTS["n_resamples"]
    seed: int = DEFAULTS["seed"]
    level: float = DEFAULTS["level"]


@dataclass(frozen=True, eq=False)
class Sample:
    """One subset's units as a statistic of :mod:`iso_bench.numerics.stats` reads them (``mean``: shape (n,))."""

    units: np.ndarray = field(repr=False)
    statistic: str
    strata: np.ndarray | None = field(default=None, repr=False)
    key: str = ""
    file: str = ""  # the units file's name

    @property
    def n(self) -> int:
        return int(self.units.shape[0])


def design_of(result: Result) -> Design:
    """The recorded interval's resamples, seed and level (:data:`DEFAULTS` where none is recorded)."""
    interval = result.record.get("interval")
    interval = interval if isinstance(interval, Mapping) else {}

    def whole(name: str) -> int:
        value = interval.get(name)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= (1 if name == "n_resamples" else 0)
        return int(value) if ok else int(DEFAULTS[name])  # type: ignore[arg-type]

    level = interval.get("level")
    level = float(level) if isinstance(level, (int, float)) and 0 < level < 1 else DEFAULTS["level"]
    return Design(whole("n_resamples"), whole("seed"), level)


def recorded_interval(result: Result) -> tuple[float, float] | None:
    """``(low, high)`` of the interval recorded with a result of one subset, as fractions; None when none."""
    interval = result.record.get("interval")
    if len(result.subsets) > 1 or not isinstance(interval, Mapping):
        return None
    low, high = interval.get("low"), interval.get("high")
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in (low, high))
    return (float(low), float(high)) if ok else None  # type: ignore[arg-type]


def misaligned(a: Sample, b: Sample) -> str | None:
    """Why two samples cannot be compared unit by unit (another statistic, size, gold or subsets), else None."""
    if a.statistic != b.statistic:
        return f"different statistics ({a.statistic}, {b.statistic})"
    if a.units.shape != b.units.shape:
        return f"{a.n} and {b.n} units" if a.n != b.n else f"units of shapes {a.units.shape} and {b.units.shape}"
    if a.statistic in GOLD:
        differ = int(np.count_nonzero(a.units[:, GOLD[a.statistic]] != b.units[:, GOLD[a.statistic]]))
        if differ:
            return f"the gold differs at {differ} of {a.n} units"
    if (a.strata is None) != (b.strata is None) or (a.strata is not None and not np.array_equal(a.strata, b.strata)):
        return "different subsets (strata)"
    return None


class UnitsStore:
    """The units of every result, each file read (and its SHA-256 checked) once."""

    def __init__(self) -> None:
        self._files: dict[Path, tuple[bytes, str]] = {}
        self._samples: dict[str, list[Sample] | str] = {}
        self._missing: dict[str, Path] = {}  # result file -> the units file it records, not beside it

    def verify(self, results: Sequence[Result], accept_modified: bool = False) -> list[Result]:
        """``results``, every units file read and checked against the SHA-256 in its record.

        A mismatch raises :class:`LeaderboardError` naming the units file and its result, unless
        ``accept_modified``: then the result comes back with ``units_check == "modified"`` (marked †, no
        interval). A malformed units file (unreadable, or not as its record describes it) is an error naming it.
        """
        out, changed = [], []
        for r in results:
            bad = self._load(r)
            if bad:
                changed.append((bad, r))
            out.append(dataclasses.replace(r, units_check=MODIFIED, units_why=UNITS_CHANGED if bad[1] is None
                                           else SCORE_CHANGED) if bad else r)
        missing = [(self._missing[r.file], r) for r in results if r.file in self._missing]
        if missing:
            (path, r), more = missing[0], len(missing) - 1
            also = f" (and those of {more} more result{'s' * (more > 1)})" if more else ""
            raise LeaderboardError(
                f"{path}: the units file that {r.path or r.file} records is missing{also}; a board's intervals and "
                "paired tests are computed from them. Put the results' units files (<task>.instances.npz) back "
                "beside them, or pass --no-ci (ci=False) to render the scores alone, without intervals, paired tests "
                "or verdict")
        if changed and not accept_modified:
            ((path, why), r), more = changed[0], [str(p) for (p, _), _ in changed[1:]]
            also = f" (and {len(more)} more: {', '.join(more[:5])}{', ...' * (len(more) > 5)})" if more else ""
            if why is None:
                why = (f"{path}: its bytes no longer match the sha256 recorded for it in {r.path or r.file} "
                       "(iso_bench.results.instances.sha256), so the units file was changed after its run")
            raise LeaderboardError(
                f"{why}{also}. Run it again (iso-bench run ... --overwrite), or pass --accept-modified "
                "(accept_modified=True) to render its result marked † as modified, without interval")
        return out

    def samples(self, result: Result) -> list[Sample] | str:
        """The units of each subset of ``result``, or why there are none."""
        if result.file not in self._samples:
            self._load(result)
        return self._samples[result.file]

    def _load(self, result: Result) -> tuple[Path, str | None] | None:
        """Read the units of ``result`` into the store; ``(units file, why)`` where they are not its run's: a
        SHA-256 that does not match (``why`` None), or units that do not give the result's main score."""
        samples: list[Sample] = []
        records = result.subsets or (result.record,)
        for record, reported in zip(records, result.main_scores or (None,) * len(records), strict=True):
            got = self._sample(result, record)
            if isinstance(got, Path):
                self._samples[result.file] = f"its units file {got.name} was changed after its run (†)"
                return got, None
            if isinstance(got, str):
                self._samples[result.file] = got
                return None
            value = main_value(got, record)
            if reported is not None and not abs(value - reported) <= SCORE_TOLERANCE:
                self._samples[result.file] = f"its main score is not the one its units file {got.file} gives (†)"
                return result.path.parent / got.file, (
                    f"{result.path}: its main score {reported!r} is not the {value!r} that its per-instance units "
                    f"({got.file}, group {got.key}) give, so the result was changed after its run")
            samples.append(got)
        self._samples[result.file] = samples
        return None

    def _sample(self, result: Result, record: Mapping[str, Any]) -> Sample | str | Path:
        """One subset's units; a reason string; or the path of a units file that fails its SHA-256."""
        inst = record.get("instances")
        if not record:
            return NOT_ISO_BENCH
        if not isinstance(inst, Mapping):
            return NO_UNITS if "interval" in record else WRITTEN_BEFORE
        name = inst.get("file")
        if name is None:
            return f"{NO_UNITS} ({inst['reason']})" if inst.get("reason") else NO_UNITS
        interval = record.get("interval")
        if isinstance(interval, Mapping) and interval.get("low") is None and interval.get("reason"):
            return f"the run found no interval ({interval['reason']})"  # too few units, too many undefined
        base = result.path.parent if result.path is not None else None
        if base is None or not isinstance(name, str) or Path(name).name != name or not name:
            raise LeaderboardError(f"{result.path or result.file}: malformed instances record (file {name!r})")
        path = base / name
        if not path.is_file():
            self._missing[result.file] = path
            return f"its units file {name} is missing"
        if path not in self._files:
            data = path.read_bytes()
            self._files[path] = (data, hashlib.sha256(data).hexdigest())
        data, digest = self._files[path]
        if digest != inst.get("sha256"):
            return path
        return _parse(path, data, inst, result)


def main_value(sample: Sample, record: Mapping[str, Any]) -> float:
    """The main score ``sample``'s units give (:meth:`iso_bench.numerics.stats.Units.main_value`), rounded as the
    record says mteb rounded it; NaN where the statistic cannot be computed from them."""
    inst = record.get("instances") if isinstance(record.get("instances"), Mapping) else {}
    decimals = inst.get("decimals") if isinstance(inst.get("decimals"), int) else None
    try:
        return Units(sample.units, sample.statistic, sample.strata, decimals=decimals).main_value()
    except (ValueError, IndexError, KeyError, TypeError, StatsError):
        return float("nan")


def _parse(path: Path, data: bytes, inst: Mapping[str, Any], result: Result) -> Sample:
    """The group ``inst["key"]`` of a units file whose bytes passed their SHA-256, checked against its record."""
    key = inst.get("key")

    def bad(why: str) -> LeaderboardError:
        return LeaderboardError(f"{path}: malformed units file: {why} (group {key!r}, recorded in {result.file})")

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files if isinstance(key, str) and name.startswith(f"{key}/")}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise bad(f"not a readable npz ({exc})") from exc
    try:
        stored = units_file.unpack(arrays, f"{key}/units")
    except ValueError as exc:
        raise bad(str(exc)) from None
    if stored is None or f"{key}/statistic" not in arrays:
        raise bad("no units or statistic")
    statistic = str(arrays[f"{key}/statistic"].item()) if arrays[f"{key}/statistic"].ndim == 0 else ""
    if statistic != inst.get("statistic"):
        raise bad(f"statistic {statistic!r}, while its record says {inst.get('statistic')!r}")
    units = np.asarray(stored, dtype=np.float64)
    if statistic == "mean" and units.ndim == 2 and units.shape[1] == 1:
        units = units[:, 0]
    strata = units_file.strata_of(arrays, key)
    if statistic == "wmean" and (strata is None or strata.shape != units.shape[:1]):
        raise bad("wmean units without one stratum per unit")
    shape_ok = {"(n, 2)": units.ndim == 2 and units.shape[1:] == (2,), "(n,)": units.ndim == 1,
                "(n, k + 1)": units.ndim == 2 and units.shape[1] >= 2}.get(SHAPES.get(statistic, ""), units.ndim >= 1)
    if not shape_ok or not np.isfinite(units).all():
        raise bad(f"{statistic} needs finite units shaped {SHAPES.get(statistic, '(n, ...)')}; got {units.shape}")
    if isinstance(inst.get("n_units"), int) and inst["n_units"] != units.shape[0]:
        raise bad(f"{units.shape[0]} units, while its record says {inst['n_units']}")
    return Sample(units, statistic, None if strata is None else np.asarray(strata), str(key), path.name)


__all__ = ["DEFAULTS", "Design", "NOT_ISO_BENCH", "NO_UNITS", "Sample", "UnitsStore", "WRITTEN_BEFORE", "design_of",
           "misaligned", "recorded_interval"]
