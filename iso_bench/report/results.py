"""Read an iso-bench results folder: mteb's layout, ``RESULTS_DIR/results/<model>/<revision>/<Task>.json``,
and ``<model>/<revision>/experiments/<experiment>/<Task>.json`` for a variant run with a recorded setup.

Plain ``json``, no mteb import. A model name is ``<base model>+<method spec>``; the base is the part before
the last ``+``. Each task result file becomes one :class:`Result`: its main score, every metric of its main
entry, the ``iso_bench`` provenance record the runner wrote into it, and its setup: the ``experiment_kwargs``
of its experiment folder's ``model_meta.json`` (fit corpus, seed, pooling, ...), ``{}`` for a plain folder;
and its :attr:`Result.check`: whether its scores, record and identity (model name, revision, setup, task) still
match the digest written with them (:func:`iso_bench.results.result_files.check_entry`). A modified result is refused
unless ``accept_modified``.

>>> sorted({r.task for r in read_results("results")})         # doctest: +SKIP
['STS12', 'STSBenchmark']
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iso_bench.registry import IsoBenchError
from iso_bench.report.setups import SetupKey, setup_key
from iso_bench.results.failures import SUFFIX, read_failure
from iso_bench.results.result_files import (
    MODIFIED,
    OLDER,
    UNVERIFIED,
    VERIFIED,
    check_entry,
    digest_removed,
    identity,
)
from iso_bench.results.setups import same_data, same_setup, short

META = "model_meta.json"


class LeaderboardError(IsoBenchError, ValueError):
    """A results folder that cannot be turned into a leaderboard (missing, empty, or a malformed file)."""


@dataclass(frozen=True)
class Result:
    """The main entry of one task result file."""

    file: str  # path under the results folder, posix
    base: str  # base model id
    variant: str  # method spec
    revision: str
    task: str
    main_score: float | None  # a fraction; None when the file holds a non-finite score
    scores: Mapping[str, Any]  # every metric of the entry
    record: Mapping[str, Any]  # the iso_bench provenance record ({} when absent)
    mteb_version: str | None = None
    date: str | None = None  # YYYY-MM-DD, UTC
    dataset_revision: str | None = None
    setup: Mapping[str, Any] = field(default_factory=dict)  # experiment kwargs; {} for a plain folder
    experiment: str = ""  # the experiment folder's name; "" for a plain folder
    check: str = UNVERIFIED  # VERIFIED, MODIFIED (an entry no longer matches its digest), OLDER or UNVERIFIED
    path: Path | None = None  # the result file, as found under the folder given (its units file lies beside it)
    subsets: tuple[Mapping[str, Any], ...] = ()  # the iso_bench record of every entry (subset) of its split
    units_check: str = ""  # MODIFIED when a units file no longer matches the sha256 recorded for it, else ""
    units_why: str = ""  # with units_check: UNITS_CHANGED (its bytes) or SCORE_CHANGED (a main score they don't give)
    main_scores: tuple[float, ...] = ()  # the main score of every entry (subset) of its split, as in the file

    @property
    def state(self) -> str:
        """The mark the result's cells get: MODIFIED when its scores or its units were changed after its run,
        else its :attr:`check`."""
        return MODIFIED if MODIFIED in (self.check, self.units_check) else self.check

    @property
    def setup_key(self) -> SetupKey:
        """The setup's identity (see :func:`iso_bench.report.setups.setup_key`), as this version names it: the
        route an older version recorded (``data: mirror``) left out, its ``file_<digest>`` fit corpus by the file's
        name (:func:`iso_bench.results.setups.same_setup`)."""
        fit = self.record.get("fit") if isinstance(self.record, Mapping) else None
        path = fit.get("path") if isinstance(fit, Mapping) and isinstance(fit.get("path"), str) else None
        return setup_key(same_setup(self.setup, path))

    @property
    def data(self) -> Mapping[str, Any]:
        """The record of the data the result was computed from (repository, revision, digests); {} when none."""
        data = self.record.get("data") if isinstance(self.record, Mapping) else None
        return data if isinstance(data, Mapping) else {}

    @property
    def method(self) -> str:
        """The method as recorded (``whiten-256``), else the variant's spec."""
        variant = self.record.get("variant")
        method = variant.get("method") if isinstance(variant, dict) else None
        return str(method) if method else self.variant

    @property
    def fits(self) -> list[dict[str, Any]]:
        """The recorded fits (one per level), each with its ``learned`` state; [] when none is recorded."""
        fit = self.record.get("fit")
        fits = fit.get("fits") if isinstance(fit, dict) else None
        return [f for f in fits if isinstance(f, dict)] if isinstance(fits, list) else []


def split_model_name(name: str) -> tuple[str, str]:
    """``(base, spec)``: ``split_model_name("org/m+whiten-256") == ("org/m", "whiten-256")``."""
    base, plus, spec = name.rpartition("+")
    return (base, spec) if plus and base and spec else (name, "(as is)")


def read_results(results_dir: str | Path, accept_modified: bool = False) -> list[Result]:
    """Every task result under ``results_dir/results/`` (or under ``results_dir`` itself), sorted.

    Plain folders (``<model>/<revision>/<Task>.json``) and experiment folders
    (``<model>/<revision>/experiments/<name>/<Task>.json``, whose ``model_meta.json`` gives the model name and
    the setup) alike. Raises :class:`LeaderboardError` naming the folder or the file when the folder is
    missing or holds no result, a file is not a task result (bad JSON, no ``task_name``, ``scores`` or
    ``main_score``), an experiment folder has no readable setup, or two files hold the same task of the
    same model, revision, variant and setup; or when a file's scores no longer match the digest written with
    them (edited after its run) and ``accept_modified`` is false. With it, such a result comes back with
    ``check == "modified"``, to be shown marked. A result without a digest is ``"unverified"``, never refused.

    >>> sorted({r.task for r in read_results("results")})         # doctest: +SKIP
    ['STS12', 'STSBenchmark']
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise LeaderboardError(f"{root}: no such results folder")
    top = root / "results" if (root / "results").is_dir() else root
    files = sorted(p for pattern in ("*/*/*.json", "*/*/experiments/*/*.json") for p in top.glob(pattern)
                   if p.name != META and not p.name.startswith("."))  # hidden: a write never finished
    if not files:
        raise LeaderboardError(f"{root}: no result files (expected {top}/<model>/<revision>/<task>.json)")
    names: dict[Path, str] = {}
    seen: dict[tuple[str, str, str, SetupKey, str], Result] = {}
    for path in files:
        r = _parse(path, path.relative_to(top).as_posix(), *_where(path, top, names))
        key = (r.base, r.revision, r.variant, r.setup_key, r.task)
        seen[key] = _one_of(seen[key], r, top) if key in seen else r
    for path in sorted(p for pattern in ("*/*/*", "*/*/experiments/*/*") for p in top.glob(pattern + SUFFIX)):
        failed = read_failure(path)  # a failed evaluation, recorded where its result would be: – and why
        if failed is not None:
            if (path.parent / META).is_file() or len(path.relative_to(top).parts) != 5:
                name, revision, setup, experiment = _where(path, top, names)
            else:  # no result yet in its experiment folder: the setup the failure recorded
                name, revision, setup, experiment = (failed.get("model") or "", path.parents[2].name,
                                                     failed.get("setup") or {}, path.parent.name)
            base, variant = split_model_name(name)
            r = Result(path.relative_to(top).as_posix(), base, variant, revision, failed["task"], None, {},
                       {"failed": failed["reason"], **({"benchmark": failed["benchmark"]} if isinstance(
                           failed.get("benchmark"), dict) else {})},
                       setup=setup, experiment=experiment, check=VERIFIED, path=path)
            seen.setdefault((r.base, r.revision, r.variant, r.setup_key, r.task), r)  # a result written wins
    modified = sorted(r.file for r in seen.values() if r.check == MODIFIED)
    if modified and not accept_modified:
        removed = {r.file for r in seen.values() if any(digest_removed(s) for s in r.subsets)}
        raise _modified_error(top, modified, removed)
    return [seen[k] for k in sorted(seen)]


def _one_of(first: Result, second: Result, top: Path) -> Result:
    """Of two results of one task in one setup, the one in this version's layout, where the other is the same
    setup as an older version filed it (with ``data: mirror``) and of the same data (or data that cannot be
    told apart); :class:`LeaderboardError` naming both otherwise: other data is never merged silently."""
    current = [r for r in (first, second) if dict(r.setup) == same_setup(r.setup)]
    if same_data(first.data, second.data) is False:
        raise LeaderboardError(
            f"{top / second.file}: a result for {second.task} of {second.base}+{second.variant} in the setup of "
            f"{top / first.file}, computed from other data ({short(second.data)}; the other: {short(first.data)}); "
            "move one of them to another results folder, so that each board holds one version of the data")
    if len(current) != 1:
        setup = f" in setup {second.experiment}" if second.setup else ""
        raise LeaderboardError(f"{top / second.file}: a second result for {second.task} of {second.base}+"
                               f"{second.variant}{setup} (first: {first.file})")
    return current[0]


def _modified_error(top: Path, files: list[str], removed: set[str]) -> LeaderboardError:
    """The refusal of results whose scores no longer match their digests (or whose digest was removed, those in
    ``removed``): the first file, then the others."""
    more = f" (and {len(files) - 1} more: {', '.join(files[1:6])}{', ...' * (len(files) > 6)})" if files[1:] else ""
    what = ("its record is of a version that writes a digest (iso_bench.result_sha256) and the digest was removed"
            if files[0] in removed else "its scores, model name, setup or provenance no longer match the digest "
            "written with them (iso_bench.result_sha256)")
    return LeaderboardError(
        f"{top / files[0]}: {what}, so the result was changed after its run{more}. Run it again "
        "(iso-bench run ... --overwrite), or pass --accept-modified (accept_modified=True) to render it, marked † "
        "as modified")


def _where(path: Path, top: Path, names: dict[Path, str]) -> tuple[str, str, dict[str, Any], str]:
    """``(model name, revision, setup, experiment)`` of a result file, from its folders and meta files."""
    if len(path.relative_to(top).parts) == 5:  # <model>/<revision>/experiments/<experiment>/<Task>.json
        name, setup = _experiment(path.parent / META)
        return name, path.parents[2].name, setup, path.parent.name
    if path.parent.parent not in names:
        names[path.parent.parent] = _model_name(path.parent.parent)
    return names[path.parent.parent], path.parent.name, {}, ""


def _experiment(meta_path: Path) -> tuple[str, dict[str, Any]]:
    """The model name and experiment kwargs of an experiment folder's ``model_meta.json``."""
    if not meta_path.is_file():
        raise LeaderboardError(f"{meta_path}: missing; an experiment folder's setup is read from it")
    meta = _read_json(meta_path)
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise LeaderboardError(f'{meta_path}: malformed model_meta.json (no "name" string)')
    kwargs = meta.get("experiment_kwargs")
    if not isinstance(kwargs, dict) or not kwargs:
        raise LeaderboardError(f'{meta_path}: malformed model_meta.json of an experiment (no "experiment_kwargs")')
    return meta["name"], kwargs


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LeaderboardError(f"{path}: not a readable JSON file ({exc})") from exc


def _model_name(folder: Path) -> str:
    """The name in ``model_meta.json`` when there is one, else the folder's (mteb writes ``/`` as ``__``)."""
    metas = sorted(folder.glob(f"*/{META}"))
    if not metas:
        return folder.name.replace("__", "/")
    meta = _read_json(metas[0])
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise LeaderboardError(f'{metas[0]}: malformed model_meta.json (no "name" string)')
    return meta["name"]


def _parse(path: Path, rel: str, name: str, revision: str, setup: dict[str, Any], experiment: str) -> Result:
    base, variant = split_model_name(name)
    data = _read_json(path)

    def bad(why: str) -> LeaderboardError:
        return LeaderboardError(f"{path}: malformed task result: {why}")

    if not isinstance(data, dict):
        raise bad("not a JSON object")
    task, splits = data.get("task_name"), data.get("scores")
    if not isinstance(task, str) or not task:
        raise bad('no "task_name" string')
    if not isinstance(splits, dict) or not splits:
        raise bad('no "scores" object with a split')
    split = "test" if "test" in splits else sorted(splits)[0]
    entries = splits[split]
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise bad(f'"scores.{split}" is not a non-empty list of objects')
    for e in entries:
        if isinstance(e.get("main_score"), bool) or not isinstance(e.get("main_score"), (int, float)):
            raise bad(f'"main_score" of split {split!r} is not a number: {e.get("main_score")!r}')
    main = math.fsum(e["main_score"] for e in entries) / len(entries)  # subsets: their mean, as mteb
    entry = next((e for e in entries if e.get("hf_subset") == "default"), entries[0])
    record = entry.get("iso_bench") or {}
    if not isinstance(record, dict):
        raise bad('"iso_bench" is not an object')
    version, day, dataset = data.get("mteb_version") or entry.get("mteb_version"), None, data.get("dataset_revision")
    stamp = data.get("date")
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and math.isfinite(stamp):
        day = datetime.fromtimestamp(stamp, tz=timezone.utc).date().isoformat()
    elif isinstance(stamp, str) and len(stamp) >= 10 and stamp[4] == stamp[7] == "-":
        day = stamp[:10]
    subsets = tuple(e["iso_bench"] if isinstance(e.get("iso_bench"), dict) else {} for e in entries)
    return Result(rel, base, variant, revision, task, main if math.isfinite(main) else None, entry, record,
                  None if version is None else str(version), day, None if dataset is None else str(dataset),
                  setup, experiment, _check(splits, identity(name, revision, setup, task)), path, subsets,
                  main_scores=tuple(float(e["main_score"]) for e in entries))


def _check(splits: dict[str, Any], ident: dict[str, Any]) -> str:
    """The file's :attr:`Result.check`, its entries checked against ``ident`` (the :func:`identity` its folders
    and meta files give): modified when any score entry is, else unverified when any is, else older when any
    is, else verified."""
    found = {check_entry(e, ident) for entries in splits.values() if isinstance(entries, list)
             for e in entries if isinstance(e, dict)}
    return next((c for c in (MODIFIED, UNVERIFIED, OLDER) if c in found), VERIFIED)
