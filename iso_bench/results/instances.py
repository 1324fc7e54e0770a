"""Per-instance units of iso-bench's results, kept beside each result file: what a bootstrap needs for an
interval around a main score, or to compare two variants on the same instances.

While an iso-bench variant is evaluated (``iso-bench run`` or a user's own ``mteb.evaluate``), the values mteb
turns into the main score are captured on mteb's task classes (:func:`install_capture`; each wrapper calls
mteb's method and returns its result unchanged, and records only for tracked variants). Per (split, subset):

* STS: mteb's per-pair similarity of the main score (``cosine_scores``) and normalised gold: ``spearman``;
* pair classification: the five per-pair score vectors signed so that higher is more similar, then the 0/1
  label: ``max_ap`` (or ``max_accuracy``, the best-threshold accuracy as mteb finds it);
* classification (single label, train/test, accuracy): each test example's correctness averaged over mteb's
  experiments: ``mean``;
* retrieval and reranking: the per-query value of the main metric: ``mean``, rounded to 5 ``decimals`` as mteb;
* iso-bench's own kinds: what their ``score`` leaves in ``last_units`` (:mod:`iso_bench.kinds`).

Anything else gets a reason instead, and so do units whose recomputed main score is not the result's to
:data:`TOLERANCE`. :func:`write_instances` writes ``<Task>.instances.npz`` beside ``<Task>.json``; each score
entry's ``iso_bench`` record names its group and holds its interval; :func:`load_units` reads a group back.

Example:
    >>> units, statistic, strata = load_units(path, entry["iso_bench"])                   # doctest: +SKIP
    >>> stats.confidence_interval(units, statistic, strata=strata)                        # doctest: +SKIP
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import weakref
from typing import Any

import numpy as np

from iso_bench.numerics import stats
from iso_bench.numerics.stats import CUSTOM, Units, max_accuracy, statistic_of, wsd_f1  # noqa: F401 - named here too
from iso_bench.results.result_files import INSTANCES_SUFFIX, InstancesError, result_path  # noqa: F401 - here too
from iso_bench.results.units_file import load_units, write_units_file  # noqa: F401 - the reader, here too

logger = logging.getLogger(__name__)

N_RESAMPLES = 1000  # bootstrap resamples of the recorded interval, unless the encoder says (``--resamples``)
SEED = 0  # seed of the resample indices (iso_bench.numerics.stats.bootstrap_indices)
LEVEL = 0.95
TOLERANCE = 1e-9  # largest |recomputed - reported| main score for which the units are kept
SUPPORTED = ("STS", "PairClassification", "Classification", "Retrieval", "Reranking")


# ---- capture on mteb's task classes --------------------------------------------------------------------

_STORES: weakref.WeakKeyDictionary[Any, dict[tuple[str, str, str], _Group]] = weakref.WeakKeyDictionary()


class _Group:
    """What one (task, split, subset) evaluation left: its units with the main score they give (``value``)
    and, once computed, their ``interval`` record; or the reason there are none."""

    def __init__(self, source: Units | str) -> None:
        self.source, self.value, self.interval = source, float("nan"), None
        if isinstance(source, Units):
            try:
                self.value = source.main_value()
            except (ValueError, IndexError, KeyError, stats.StatsError) as exc:
                self.source = f"the main score cannot be recomputed from the units ({exc})"


class _Capture:
    """The values the scoring hooks saw while one subset of ``task`` was evaluated."""

    def __init__(self, task: Any, reason: str | None = None) -> None:
        self.task, self.reason, self.parts = task, reason, []


_ACTIVE: list[_Capture] = []


_ENCODERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def track(meta: Any, encoder: Any) -> None:
    """Remember which encoder a variant's ``ModelMeta`` belongs to, so that the results mteb writes for it
    carry the encoder's provenance record (see :func:`iso_bench.mteb_plugin.install_result_hook`)."""
    _ENCODERS[id(meta)] = encoder


def encoder_of(meta: Any) -> Any | None:
    """The encoder :func:`track` paired with ``meta``, while it still holds that ``ModelMeta``; else None."""
    encoder = _ENCODERS.get(id(meta))
    return encoder if encoder is not None and getattr(encoder, "mteb_model_meta", None) is meta else None


def tracked(model: Any) -> bool:
    """Whether ``model`` is an iso-bench variant whose results carry iso-bench's records: an encoder that
    :func:`track` paired with the ``ModelMeta`` it holds."""
    meta = getattr(model, "mteb_model_meta", None)
    return meta is not None and _ENCODERS.get(id(meta)) is model


def keep_units(model: Any, task_name: str, split: str, subset: str, units: Units | str | None) -> None:
    """Remember the units (or the reason there are none) of one subset a tracked variant was just scored on;
    the next result written for that variant and task records them. Untracked models keep nothing."""
    if tracked(model):
        reason = "the task kind keeps no per-instance values"
        _STORES.setdefault(model, {})[(task_name, split, subset)] = _Group(reason if units is None else units)


def _context(original: Any, reason: str | None = None) -> Any:
    """``_evaluate_subset`` that, for a tracked variant, gathers what the scoring hooks see and keeps it."""

    @functools.wraps(original)
    def wrapper(self: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracked(model):
            return original(self, model, *args, **kwargs)
        key = (self.metadata.name, kwargs.get("hf_split"), kwargs.get("hf_subset"))
        store = _STORES.setdefault(model, {})
        store.pop(key, None)  # a failed evaluation leaves nothing of an earlier one
        capture = _Capture(self, reason)
        _ACTIVE.append(capture)
        if args:
            args = (listed_columns(args[0]), *args[1:])
        try:
            scores = original(self, model, *args, **kwargs)
        finally:
            _ACTIVE.remove(capture)
        try:
            store[key] = _Group(capture.reason or _units_for(self, capture.parts))
        except Exception as exc:  # noqa: BLE001 - bookkeeping never fails mteb's evaluation
            store[key] = _Group(f"the captured values could not be read ({type(exc).__name__}: {exc})")
        return scores

    wrapper.iso_bench_capture = True  # type: ignore[attr-defined]
    return wrapper


def listed_columns(data_split: Any) -> Any:
    """``data_split`` (a ``datasets.Dataset`` in python format) as a dataset whose plain columns, asked for by
    name, come back as python lists read at once (what ``datasets`` before 4.0 returned, and mteb reads
    either), instead of a ``Column`` that formats its rows one by one (30 ms for an STS task's 3,000 scores,
    a second per run of 56 results). A ``DatasetDict`` (a classification task's training and evaluated splits)
    gets each split so: mteb's classification looks up each training label by index to undersample and hands
    the evaluated labels to seven scikit-learn metrics, and row by row that was most of a Banking77 result's
    time. The same rows and values; anything else is returned unchanged."""
    from datasets import Dataset, DatasetDict  # lazily: datasets loads pyarrow

    if type(data_split) is DatasetDict:
        return DatasetDict({name: listed_columns(split) for name, split in data_split.items()})
    if type(data_split) is not Dataset or data_split._format_type is not None:
        return data_split
    listed = copy.copy(data_split)  # shares the Arrow table; nothing is read or copied
    listed.__class__ = _listed_class()
    return listed


@functools.lru_cache(maxsize=1)
def _listed_class() -> type:
    from datasets import Dataset, Value  # lazily: datasets loads pyarrow
    from datasets.formatting import query_table  # lazily: datasets loads pyarrow

    class ListedColumns(Dataset):
        def __getitem__(self, key: Any) -> Any:
            feature = self.features.get(key) if isinstance(key, str) and self._format_type is None else None
            if isinstance(feature, Value):  # numbers and strings: Arrow's python values are the formatter's
                return query_table(self._data, key, indices=self._indices).column(key).to_pylist()
            return super().__getitem__(key)

    return ListedColumns


def _recorder(original: Any) -> Any:
    """A scoring method that records its arguments (by name) for the capture of its own task object."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _ACTIVE and _ACTIVE[-1].task is self:
            try:
                _ACTIVE[-1].parts.append(signature.bind(self, *args, **kwargs).arguments)
            except TypeError as exc:  # called unlike mteb calls it: mteb's own call decides what happens
                _ACTIVE[-1].reason = f"{original.__name__} was called in an unexpected way ({exc})"
        return original(self, *args, **kwargs)

    wrapper.iso_bench_capture = True  # type: ignore[attr-defined]
    return wrapper


_BUILDERS: list[tuple[type, Any]] = []  # (mteb task class, the function that makes its units), once installed


def install_capture() -> None:
    """Wrap the methods of mteb's STS, pair classification, classification and retrieval task classes that
    receive the per-instance values (and ``_evaluate_subset``, which gives them their split and subset).
    Idempotent."""
    from mteb.abstasks.classification import AbsTaskClassification as Clf  # lazily: mteb takes seconds to import
    from mteb.abstasks.pair_classification import (  # lazily: mteb takes seconds to import
        AbsTaskPairClassification as Pair,  # lazily: mteb takes seconds to import
    )
    from mteb.abstasks.retrieval import AbsTaskRetrieval as Ret  # lazily: mteb takes seconds to import
    from mteb.abstasks.sts import AbsTaskSTS as STS  # lazily: mteb takes seconds to import

    cross = "cross-validation: every fold scores other examples, so no example has one value per run"
    for cls, name, wrap in ((STS, "_evaluate_subset", _context), (Pair, "_evaluate_subset", _context),
                            (Clf, "_evaluate_subset", _context), (Ret, "_evaluate_subset", _context),
                            (Clf, "_evaluate_subset_cross_validation", functools.partial(_context, reason=cross)),
                            (STS, "_calculate_scores", _recorder), (Pair, "_compute_metrics", _recorder),
                            (Clf, "_calculate_scores", _recorder), (Ret, "task_specific_scores", _recorder)):
        original = cls.__dict__[name]
        if not getattr(original, "iso_bench_capture", False):
            setattr(cls, name, wrap(original))
    _BUILDERS[:] = [(STS, _sts_units), (Pair, _pair_units), (Clf, _classification_units), (Ret, _retrieval_units)]


def _no_units(task_type: str | None, name: str) -> str:
    """Why a score entry has no units: its type has none, or this task scores in a way iso-bench does not see."""
    if task_type in SUPPORTED:
        return f"per-instance values were not captured: {name} scores its subsets in its own way"
    return f"no per-instance units for task type {task_type}"


def _units_for(task: Any, parts: list[dict[str, Any]]) -> Units | str:
    """The units of a captured subset, by task type, or why there are none."""
    if not parts:
        return _no_units(task.metadata.type, task.metadata.name)
    make = next(make for cls, make in _BUILDERS if isinstance(task, cls))
    return make(task, parts, task.metadata.main_score)


_STS_COLUMNS = {"cosine_spearman": "cosine_scores", "manhattan_spearman": "manhattan_distances",
                "euclidean_spearman": "euclidean_distances", "spearman": "similarity_scores"}


def _sts_units(task: Any, parts: list[dict[str, Any]], main: str) -> Units | str:
    if main not in _STS_COLUMNS:
        return f"main score {main}: only a Spearman correlation has per-pair units here (no interval)"
    (part,) = parts
    scores = part["scores"]
    predicted = scores.get(_STS_COLUMNS[main])
    if predicted is None:  # a model without a similarity function: mteb's "spearman" is the cosine one
        predicted = scores["cosine_scores"]
    return Units(np.column_stack([np.asarray(predicted, np.float64),
                                  np.asarray(part["normalized_scores"], np.float64)]), "spearman")


_PAIR_COLUMNS = (("similarity", "similarity_scores", 1.0), ("cosine", "cosine_scores", 1.0),
                 ("manhattan", "manhattan_distances", -1.0), ("euclidean", "euclidean_distances", -1.0),
                 ("dot", "dot_scores", 1.0))


def _pair_units(task: Any, parts: list[dict[str, Any]], main: str) -> Units | str:
    prefix, _, metric = main.partition("_")
    columns = [c for c in _PAIR_COLUMNS if prefix in ("max", c[0])]
    if metric not in ("ap", "accuracy") or not columns:
        return f"main score {main}: only average precision and accuracy have per-pair units here (no interval)"
    (part,) = parts
    labels = np.asarray(part["labels"], dtype=np.float64)
    if not np.isin(labels, (0.0, 1.0)).all():
        return "pair labels other than 0 and 1"
    table = [sign * np.asarray(part["similarity_scores"][key], np.float64) for _, key, sign in columns]
    return Units(np.column_stack([*table, labels]), "max_ap" if metric == "ap" else "max_accuracy")


def _classification_units(task: Any, parts: list[dict[str, Any]], main: str) -> Units | str:
    if main != "accuracy":
        return (f"main score {main}: only accuracy is a mean of per-example values; no interval is computed "
                "from any other metric")
    gold = np.asarray(parts[0]["y_test"])
    if any(not np.array_equal(np.asarray(p["y_test"]), gold) for p in parts):
        return "the experiments scored different examples"
    return Units(np.mean([np.asarray(p["y_pred"]) == gold for p in parts], axis=0), "mean")


_PYTREC = {"ndcg": "ndcg_cut_", "map": "map_cut_", "recall": "recall_", "precision": "P_", "hit_rate": "success_"}


def _retrieval_units(task: Any, parts: list[dict[str, Any]], main: str) -> Units | str:
    (part,) = parts
    metric, _, k = ("recall_at_1" if main == "accuracy" else main).rpartition("_at_")
    if metric in _PYTREC and k.isdigit():
        key = _PYTREC[metric] + k
        return Units([q[key] for q in part["scores"].values()], "mean", decimals=5)
    if metric == "mrr" and k.isdigit() and not getattr(task, "skip_first_result", False):
        from mteb._evaluators.retrieval_metrics import mrr  # lazily: mteb takes seconds to import

        return Units(mrr(part["qrels"], part["results"], [int(k)])[f"MRR@{k}"], "mean")
    return f"main score {main}: no per-query values of it are kept (no interval)"


# ---- the file beside each result, and the records ------------------------------------------------------


def interval_record(units: Units, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """The ``interval`` record of a score entry: :func:`iso_bench.numerics.stats.confidence_interval` of
    ``units`` with ``n_resamples`` (the encoder's, ``--resamples``), :data:`SEED` and :data:`LEVEL`; where the
    bootstrap refuses the units (too few, too many undefined resamples) the bounds are null and ``reason`` says
    why."""
    base = {"level": LEVEL, "n_resamples": n_resamples, "seed": SEED, "method": "percentile"}
    try:
        ci = stats.confidence_interval(units.units, statistic_of(units.statistic), n_resamples, SEED, LEVEL,
                                       units.strata)
    except stats.StatsError as exc:
        return {**base, "low": None, "high": None, "estimate": None, "n_undefined": None, "reason": str(exc)}
    return {**base, "low": ci.low, "high": ci.high, "estimate": ci.estimate, "n_undefined": ci.n_undefined}


def _verified(group: _Group | None, reported: Any, missing: str, where: str, n_resamples: int) -> _Group | str:
    """``group`` when its units give the reported main score to :data:`TOLERANCE` (its interval computed
    then, once), else the reason it is not kept."""
    if group is None or isinstance(group.source, str):
        return missing if group is None else group.source
    if not (isinstance(reported, (int, float)) and abs(group.value - reported) <= TOLERANCE):
        reason = (f"the main score recomputed from the per-instance values ({group.value!r}) differs from the "
                  f"result's ({reported!r}) by more than {TOLERANCE}")
        logger.warning("%s: %s; no per-instance values are kept", where, reason)
        return reason
    if group.interval is None or group.interval["n_resamples"] != n_resamples:
        group.interval = interval_record(group.source, n_resamples)
    return group


def _arrays(key: str, group: _Group) -> dict[str, np.ndarray]:
    u = group.source
    assert isinstance(u, Units)
    out = {f"{key}/units": u.units, f"{key}/statistic": np.array(u.statistic),
           f"{key}/main_score": np.array(group.value, dtype=np.float64)}
    if u.strata is not None:
        out[f"{key}/strata"] = u.strata
        out[f"{key}/strata_names"] = np.array(u.strata_names, dtype=str)
    return out


def write_instances(cache: Any, task_result: Any, meta: Any, encoder: Any, task_type: str | None = None
                    ) -> dict[tuple[str, str], dict[str, Any]]:
    """Write ``<Task>.instances.npz`` beside the result of ``task_result``
    (:func:`iso_bench.results.result_files.write_units_file`) and return, per (split, subset) of each score entry
    without an ``iso_bench`` record, its ``instances`` and ``interval`` records. The groups of entries merged
    from an earlier run are carried over, and their records get the new file's SHA-256."""
    name = task_result.task_name
    target = result_path(cache, name, meta).with_name(name + INSTANCES_SUFFIX)
    store = _STORES.get(encoder, {})
    missing = _no_units(task_type, name)
    n_resamples = int(getattr(encoder, "n_resamples", N_RESAMPLES))  # the encoder's --resamples
    arrays: dict[str, np.ndarray] = {}
    outcome: dict[tuple[str, str], tuple[str, _Group | str]] = {}
    kept: list[dict[str, Any]] = []
    for split, entries in task_result.scores.items():
        for entry in entries:
            subset, record = entry.get("hf_subset", "default"), entry.get("iso_bench")
            if record is not None:
                info = record.get("instances") if isinstance(record, dict) else None
                if isinstance(info, dict) and info.get("file") == target.name:
                    kept.append(info)
                continue
            key = f"{split}/{subset}"
            found = _verified(store.get((name, split, subset)), entry.get("main_score"), missing, f"{name} {key}",
                              n_resamples)
            outcome[(split, subset)] = (key, found)
            if isinstance(found, _Group):
                arrays.update(_arrays(key, found))
    sha = write_units_file(target, arrays, kept)
    return {where: _record(target.name, sha, key, found) for where, (key, found) in outcome.items()}


def _record(file: str, sha: str | None, key: str, found: _Group | str) -> dict[str, Any]:
    if isinstance(found, str):
        return {"instances": {"file": None, "reason": found}, "interval": None}
    u = found.source
    assert isinstance(u, Units)
    info = {"file": file, "sha256": sha, "key": key, "statistic": u.statistic, "n_units": int(len(u.units))}
    if u.decimals is not None:
        info["decimals"] = u.decimals
    return {"instances": info, "interval": dict(found.interval or {})}
