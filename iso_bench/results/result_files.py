"""The result files of iso-bench's variants in mteb's results folder: the digest of every score entry, files
written whole or not at all, and the repairs a run makes before it evaluates a variant again.

:func:`iso_bench.mteb_plugin.install_result_hook` writes each result of a variant with :func:`sign_scores`
and :func:`write_result`: every ``iso_bench`` record carries ``scores_sha256`` (:func:`scores_digest` of the
entry it sits in, as it lies in the file), which the leaderboard recomputes to tell a file edited after its
run; the task result, ``model_meta.json`` and ``run_settings.jsonl`` are each written through a temporary
file and a rename, with mteb's own bytes. Before a variant runs again, :func:`ensure_model_meta` and
:func:`set_aside_garbled` repair what a killed run can leave: a missing or garbled ``model_meta.json``, a result
file cut short. The per-instance units beside each result are :mod:`iso_bench.results.units_file`'s. Standard
library at import; numpy and mteb are imported inside the functions that need them.

Example (what a run does before it evaluates a variant again):
    >>> ensure_model_meta(cache, meta); set_aside_garbled(cache, meta)        # doctest: +SKIP
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iso_bench.faults import fault_point
from iso_bench.files import STALE_AFTER, atomic_write_text, remove_stale_temporaries, replacing
from iso_bench.registry import IsoBenchError
from iso_bench.results.meta import meta_text  # noqa: F401 - named here for its callers

logger = logging.getLogger(__name__)

DIGEST = "result_sha256"  # the key, in a score entry's iso_bench record, of the digest of the whole result entry
SCORES_DIGEST = "scores_sha256"  # the digest older versions wrote: of the scores alone
META_FILE = "model_meta.json"
GARBLED = ".garbled"  # the suffix of a result file set aside as unreadable
NONFINITE = ".nonfinite"  # ... and of one whose main score is not a finite number (an earlier version wrote it)
# what check_entry finds: the digest matches; it does not (changed after its run); only an older scores-only
# digest, which matches; no digest at all
VERIFIED, MODIFIED, OLDER, UNVERIFIED = "verified", "modified", "older", "unverified"
# What only versions that write a digest put in a record: per-instance units and an interval came with the first
# (scores-only) digest, the benchmark record after result_sha256. A record holding them without that digest had it
# removed: MODIFIED, never an older or unverified result.
DIGEST_ERA_FIELDS = ("instances", "interval")
RESULT_DIGEST_ERA_FIELDS = ("benchmark",)
INSTANCES_SUFFIX = ".instances.npz"  # <Task>.instances.npz: the per-instance units beside <Task>.json


class InstancesError(IsoBenchError):
    """A per-instance file that is missing, changed since its record was written, or was never kept."""


class ResultsNotWritten(IsoBenchError, OSError):
    """A result (or its units file, or ``model_meta.json``) could not be written: a full or read-only disk.
    The message names the path and what to do; nothing half-written is left (each file is written whole)."""

    def __init__(self, path: Path, exc: OSError) -> None:
        why = "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        where = Path(exc.filename).parent if getattr(exc, "filename", None) else Path(path).parent
        fix = (f"({why}); free space there or pass --results a folder on a disk with room, then run the same "
               "command again: it computes only the missing results") if exc.errno != errno.ENAMETOOLONG else (
            "(a name in it is longer than the file system allows, most allow 255 bytes; not a matter of space): give "
            "the model a shorter name (a local folder's name is part of the path), or pass --results a shorter path")
        super().__init__(f"cannot write results to {where} {fix}")
        self.path = Path(path)


class NonFiniteScore(IsoBenchError, ValueError):
    """A variant's result whose main score is not a finite number (NaN, infinity): never written, and never
    counted as done. ``reason`` says it without the variant and task, for a line that names them."""

    def __init__(self, model: str, task: str, found: list[str]) -> None:
        self.reason = (f"main score {', '.join(found)} is not a finite number, so no result was written; the "
                       "method's vectors are degenerate on this task (all equal, zero or not finite): check its "
                       "parameters, or leave the variant out")
        super().__init__(f"{model} on {task}: {self.reason}")


def nonfinite_main_scores(task_result: Any) -> list[str]:
    """The main scores of ``task_result`` (an mteb ``TaskResult``) that are not finite numbers, as
    ``"<split>/<subset>: <value>"``; empty when every one is finite. mteb averages them into ``get_score()``,
    so one NaN makes the result's score NaN.

    >>> from types import SimpleNamespace
    >>> nonfinite_main_scores(SimpleNamespace(scores={"test": [{"hf_subset": "en", "main_score": float("nan")}]}))
    ['test/en: nan']
    """
    return [f"{split}/{entry.get('hf_subset', 'default')}: {value}"
            for split, entries in task_result.scores.items() for entry in entries
            if not isinstance(value := entry.get("main_score"), (int, float)) or not math.isfinite(value)]


def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     default=str).encode("utf-8")).hexdigest()


def scores_digest(entry: Mapping[str, Any]) -> str:
    """SHA-256 of a score entry without its ``iso_bench`` record, over its canonical JSON (sorted keys, no
    spaces): the ``scores_sha256`` that iso-bench 0.1 results carry, still checked where it is the only digest.

    >>> scores_digest({"main_score": 0.5, "iso_bench": {"model": "m"}}) == scores_digest({"main_score": 0.5})
    True
    """
    scores = {k: v for k, v in entry.items() if k != "iso_bench"}
    return hashlib.sha256(json.dumps(scores, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def identity(model: str, revision: str, setup: Mapping[str, Any] | None, task: str) -> dict[str, Any]:
    """What a reader takes a result to be: the model name (``<base>+<method spec>``, as ``model_meta.json``
    holds it), the revision (the folder's name), the setup (the experiment kwargs; ``{}`` in a plain folder)
    and the task. Part of every result digest (:func:`result_digest`)."""
    return {"model": model, "revision": revision, "setup": json.loads(json.dumps(dict(setup or {}), default=str)),
            "task": task}


def result_digest(entry: Mapping[str, Any], ident: Mapping[str, Any]) -> str:
    """SHA-256 of everything a reader of a score entry relies on: the entry's scores, its whole ``iso_bench``
    record (provenance, method and its resolved parameters, fit corpus, intervals: every field, those added
    later included) less the digests themselves, and the result's :func:`identity`. A change of any of them
    after the run (a score, a relabelled model, another setup) no longer matches. Not a signature: anyone can
    recompute it; it tells a file changed outside iso-bench.

    >>> ident = identity("org/m+raw", "abc", {}, "STS12")
    >>> e = {"main_score": 0.5, "iso_bench": {"model": "org/m"}}
    >>> result_digest(e, ident) == result_digest(e, {**ident, "model": "org/other+raw"})
    False
    """
    record = entry.get("iso_bench")
    if isinstance(record, Mapping):
        record = {k: v for k, v in record.items() if k not in (DIGEST, SCORES_DIGEST)}
    return _sha256({"identity": dict(ident), "entry": {**entry, "iso_bench": record}})


def check_entry(entry: Mapping[str, Any], ident: Mapping[str, Any] | None = None) -> str:
    """Whether a score entry read from a result file is as it was written, given the result's
    :func:`identity` as read from its folders: :data:`VERIFIED` (its :func:`result_digest` matches),
    :data:`MODIFIED` (a digest does not match: the file, its model name or setup was changed after its run),
    :data:`OLDER` (only the scores-only digest of iso-bench 0.1, which matches: its identity and provenance
    cannot be checked) or :data:`UNVERIFIED` (no digest: not written by an iso-bench variant). A record of a
    version that writes a digest, without it (:func:`digest_removed`), is :data:`MODIFIED`.

    >>> ident = identity("m+raw", "r", {}, "T")
    >>> e = {"main_score": 0.5, "iso_bench": {}}; e["iso_bench"][DIGEST] = result_digest(e, ident)
    >>> check_entry(e, ident), check_entry(e, {**ident, "model": "x+raw"}), check_entry({"main_score": 0.5})
    ('verified', 'modified', 'unverified')
    """
    record = entry.get("iso_bench")
    if not isinstance(record, Mapping):
        return UNVERIFIED
    digest, older = record.get(DIGEST), record.get(SCORES_DIGEST)
    if isinstance(digest, str):
        return VERIFIED if ident is not None and digest == result_digest(entry, ident) else MODIFIED
    if digest_removed(record):
        return MODIFIED
    if isinstance(older, str):
        return OLDER if older == scores_digest(entry) else MODIFIED
    return UNVERIFIED


def digest_removed(record: Mapping[str, Any]) -> bool:
    """Whether an ``iso_bench`` record lacks the digest that the version which wrote it always writes: fields of
    the ``result_sha256`` era (:data:`RESULT_DIGEST_ERA_FIELDS`) without it, or per-instance units or an interval
    (:data:`DIGEST_ERA_FIELDS`) without any digest. Such a file was edited, not written by an older version.

    >>> digest_removed({"instances": {}, "interval": {}}), digest_removed({"model": "m"})
    (True, False)
    """
    if isinstance(record.get(DIGEST), str):
        return False
    if any(k in record for k in RESULT_DIGEST_ERA_FIELDS):
        return True
    return not isinstance(record.get(SCORES_DIGEST), str) and any(k in record for k in DIGEST_ERA_FIELDS)


def sign_scores(task_result: Any, record: Mapping[str, Any],
                extra: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
                ident: Mapping[str, Any] | None = None) -> None:
    """Give each score entry of ``task_result`` that has no ``iso_bench`` record a copy of ``record`` (with
    ``extra[(split, hf_subset)]`` added: the entry's own ``instances`` and ``interval`` records, see
    :func:`iso_bench.results.instances.write_instances`) and the entry's :func:`result_digest` under ``ident`` (the
    result's :func:`identity`) as ``result_sha256``, taken from mteb's own serialisation (which rounds the
    scores), so that it equals the digest of the entry read back from the file. An entry that has a record
    keeps it as it is: scores merged from an earlier file keep the digest they were written with (or stay
    without one)."""
    fresh = {id(e) for entries in task_result.scores.values() for e in entries if "iso_bench" not in e}
    if not fresh:
        return
    for split, entries in task_result.scores.items():
        for entry in entries:
            if id(entry) in fresh:
                own = (extra or {}).get((split, entry.get("hf_subset", "default")), {})
                entry["iso_bench"] = {**record, **own}
    written = json.loads(result_text(task_result))["scores"]
    ident = dict(ident) if ident is not None else identity("", "", {}, task_result.task_name)
    for split, entries in task_result.scores.items():
        for entry, on_disk in zip(entries, written[split], strict=True):
            if id(entry) in fresh:
                entry["iso_bench"][DIGEST] = result_digest(on_disk, ident)


def result_identity(cache: Any, task_name: str, meta: Any) -> dict[str, Any]:
    """The :func:`identity` of ``meta``'s result on ``task_name`` in ``cache``, as a reader will find it: the
    revision is the name of the folder mteb puts the result in."""
    path = result_path(cache, task_name, meta)
    if path.parent.parent.name == "experiments":  # <model>/<revision>/experiments/<setup>/<Task>.json
        return identity(meta.name, path.parents[2].name, json.loads(meta_text(meta)).get("experiment_kwargs"),
                        task_name)
    return identity(meta.name, path.parent.name, {}, task_name)


class _Memory(io.StringIO):
    """The "path" :func:`result_text` hands ``TaskResult.to_disk``: it opens as itself, and what is written
    into it is kept in ``text`` when ``to_disk`` closes it."""

    text = ""

    def open(self, *args: Any, **kwargs: Any) -> _Memory:
        return self

    def close(self) -> None:
        if not self.closed:
            self.text = self.getvalue()
        super().close()


def result_text(task_result: Any) -> str:
    """The text of ``task_result``'s file, made by mteb's own ``TaskResult.to_disk`` (scores rounded, the date
    a timestamp) into memory: the file :func:`write_result` writes holds exactly mteb's bytes."""
    memory = _Memory()
    task_result.to_disk(memory)
    return memory.text


def write_result(cache: Any, task_result: Any, meta: Any, encode_kwargs: Any = None) -> Path:
    """Write what ``ResultCache.save_to_cache`` writes for a variant, each file through a temporary file and a
    rename (:func:`iso_bench.files.atomic_write_text`), so that no reader ever sees a part of one: the
    folder's ``model_meta.json`` first (where it differs), so that no result lies without it; then the task
    result (crash-test point ``result-write`` half-way); then the merged ``run_settings.jsonl``. The
    crash-test point ``between-results`` follows the last. Returns the result file's path."""
    path = result_path(cache, task_result.task_name, meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta_path, text = path.parent / META_FILE, meta_text(meta)
    if not meta_path.is_file() or meta_path.read_bytes() != text.encode("utf-8"):
        atomic_write_text(meta_path, text)
    atomic_write_text(path, result_text(task_result), fault="result-write")
    _write_run_settings(path.parent / "run_settings.jsonl", task_result, encode_kwargs)
    fault_point("between-results")
    return path


def result_path(cache: Any, task_name: str, meta: Any) -> Path:
    """Where ``cache`` keeps the result of ``meta`` (a variant's ``ModelMeta``) on ``task_name``:
    ``<model>/<revision>[/experiments/<setup>]/<task>.json``."""
    return Path(cache.get_task_result_path(task_name=task_name, model_name=meta))


_VERSIONS: dict[Any, Any] = {}  # mteb's package versions of this process, by the function that lists them


def _write_run_settings(path: Path, task_result: Any, encode_kwargs: Any) -> None:
    """mteb's run settings of ``task_result`` (a row per split: package versions, encode kwargs, subsets),
    merged into ``path`` by mteb's own merge in a copy that then replaces it. Nothing where the installed mteb
    writes no run settings."""
    from mteb.cache import ResultCache  # lazily: mteb takes seconds to import

    module = sys.modules[ResultCache.__module__]  # where save_to_cache finds these two
    versions, merge = (getattr(module, n, None) for n in ("_get_package_versions", "_write_and_merge_keyed_json"))
    if versions is None or merge is None or not task_result.scores:
        return
    kwargs = {} if encode_kwargs is None else json.loads(json.dumps(encode_kwargs, default=str))
    if versions not in _VERSIONS:  # importlib.metadata reads every installed package: once per process
        _VERSIONS[versions] = versions()
    rows = [{"task": task_result.task_name, "splits": [split], "version": _VERSIONS[versions], "encode_kwargs": kwargs,
             "subsets": sorted({e.get("hf_subset", "default") for e in entries})}
            for split, entries in task_result.scores.items()]
    with replacing(path, copy=True) as tmp:
        merge(tmp, rows)


# ---- repairs before a variant runs again ------------------------------------------------------------


def variant_folder(cache: Any, meta: Any) -> Path:
    """The folder of a variant's results in ``cache``: ``<model>/<revision>/`` or, for a variant with a
    setup, ``<model>/<revision>/experiments/<setup>/``."""
    return Path(cache.get_task_result_path(task_name="-", model_name=meta)).parent


def ensure_model_meta(cache: Any, meta: Any) -> bool:
    """Rewrite a variant's ``model_meta.json`` (atomically, as mteb writes it) when its results folder exists
    and the file is missing, not valid JSON, or holds another ``name`` or other ``experiment_kwargs``: what a
    run killed while mteb wrote it leaves. The leaderboard and mteb read the variant's name and setup from this
    file. A folder that does not exist yet is left alone (its first result writes the file). Returns whether
    the file was rewritten."""
    path = variant_folder(cache, meta) / META_FILE
    if not path.parent.is_dir():
        return False
    text = meta_text(meta)
    want = json.loads(text)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        found = None
    if isinstance(found, dict) and all(found.get(k) == want.get(k) for k in ("name", "experiment_kwargs")):
        return False
    atomic_write_text(path, text)
    logger.warning("%s was missing, unreadable or of another variant: rewritten for %s", path, meta.name)
    return True


def set_aside_garbled(cache: Any, meta: Any, stale_after: float = STALE_AFTER) -> list[Path]:
    """Prepare a variant's results folder for another run: rename each result file that mteb cannot read
    (cut short, or garbled) to ``<Task>.json.garbled`` (``.garbled-2``, ... when that name is taken), and one
    whose main score is not a finite number (:func:`nonfinite_main_scores`, as earlier versions wrote them)
    to ``<Task>.json.nonfinite``, and delete the temporary files that an interrupted write left (hidden
    ``.<name>@<host>@<pid>-*.tmp`` of a process of this host that is gone; another host's, or one of an
    earlier version, when older than ``stale_after`` seconds: :func:`iso_bench.files.remove_stale_temporaries`).
    mteb stops on an unreadable result
    (``overwrite_strategy="only-missing"`` loads it and raises); set aside, the result is missing, so it is
    computed and written again. Returns the new paths."""
    from mteb.results import TaskResult  # lazily: mteb takes seconds to import

    folder = variant_folder(cache, meta)
    if not folder.is_dir():
        return []
    remove_stale_temporaries(folder, stale_after)
    moved = []
    for path in sorted(p for p in folder.glob("*.json") if p.name != META_FILE and not p.name.startswith(".")):
        try:
            bad = nonfinite_main_scores(TaskResult.from_disk(path))
        except Exception as exc:  # noqa: BLE001 - whatever mteb fails on, it would fail on in the run
            target = _set_aside(path, GARBLED)
            why = _why_unreadable(target, exc)
        else:
            if not bad:
                continue
            target = _set_aside(path, NONFINITE)
            why = f"has a main score that is not a finite number ({', '.join(bad)})"
        logger.warning("%s %s: set aside as %s, to be computed again (move it out of the results folder if it "
                       "is a file of yours)", path, why, target.name)
        moved.append(target)
    return moved


def _set_aside(path: Path, suffix: str) -> Path:
    """Rename ``path`` to ``<name><suffix>`` (``<suffix>-2``, ... when that name is taken); the new path."""
    target, n = path.with_name(path.name + suffix), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{suffix}-{n}")
    path.rename(target)
    return target


def _why_unreadable(path: Path, exc: Exception) -> str:
    """Why mteb cannot read ``path``: not JSON (cut short, garbled), or JSON that is no task result."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return f"is not a readable result: not valid JSON, as a write cut short leaves it ({err})"
    kind = "a JSON object" if isinstance(data, dict) else f"JSON ({type(data).__name__})"
    return f"is {kind} but not an mteb task result ({type(exc).__name__}: {exc})"
