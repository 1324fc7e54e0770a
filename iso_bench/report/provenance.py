"""Provenance: the records of a set of results as citable lines, shown under every table.

Versions; model and revision; extraction; each task's dataset (revision and checksum, no local path); each
variant's fit (corpus, seed, and what it learned where that explains a number: the dimensions clip zeroed,
the directions whiten dropped); the days of the runs; hardware; software; the commands.

>>> dict(provenance(read_results("results")))["command"]     # doctest: +SKIP
('iso-bench run --model sentence-transformers/all-MiniLM-L6-v2 --methods raw whiten --tasks mteb-sts',)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iso_bench.report.results import Result

NOT_RECORDED = "not recorded"


def provenance(results: Sequence[Result]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What makes the numbers of ``results`` citable, as ``(field, sorted values)`` pairs. A failed evaluation
    (``<task>.failed``: no number, its reason in the table's notes) records no provenance and is left out."""
    results = [r for r in results if "failed" not in r.record]
    recs = [r.record for r in results]
    envs = [rec["environment"] if isinstance(rec.get("environment"), dict) else {} for rec in recs]
    days = sorted({r.date for r in results if r.date})
    return (
        ("iso-bench", _uniq([rec.get("iso_bench_version") for rec in recs])),
        ("mteb", _uniq([r.mteb_version for r in results])),
        ("model", _uniq([f"{r.base} @ {r.revision}" for r in results])),
        ("extraction", _uniq([_pairs(rec.get("extraction")) for rec in recs])),
        ("data", _uniq([_data(r) for r in results], key=lambda text: text.split(": ", 1)[0])),
        ("fit", _uniq([_fit(r) for r in results])),
        ("date", (" to ".join(dict.fromkeys((days[0], days[-1]))) if days else NOT_RECORDED,)),
        ("hardware", _uniq([f"{e['hardware']} ({e.get('device', '?')})" if e.get("hardware") else None
                            for e in envs])),
        ("software", _uniq([_pairs({k: e[k] for k in ("python", "torch", "transformers", "platform") if k in e})
                            for e in envs])),
        ("command", _uniq([rec.get("command") for rec in recs])),
    )


def _uniq(values: Sequence[Any], key: Any = None) -> tuple[str, ...]:
    """Sorted distinct values, and how many results lack one when some do."""
    found = tuple(sorted(sorted({str(v) for v in values if v}), key=key))
    lacking = sum(1 for v in values if not v)
    if not found:
        return (NOT_RECORDED,)
    return found + ((f"{NOT_RECORDED} in {lacking} of {len(values)} result files",) if lacking else ())


def _pairs(mapping: Any) -> str:
    """``a=1, b=null``: sorted keys, JSON values (stable text for any mapping)."""
    if not isinstance(mapping, dict):
        return ""
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}"
                     for k, v in sorted(mapping.items()))


def _data(r: Result) -> str:
    d = r.record.get("data")
    if not isinstance(d, dict):
        return f"{r.task}: dataset revision {r.dataset_revision or '?'} (source {NOT_RECORDED})"
    sha = f", rows sha256 {d['rows_sha256']}" if d.get("rows_sha256") else \
        f", sha256 {d['sha256']}" if d.get("sha256") else ""  # the rows read; else (older) the folder's files
    extra = "".join(f"; {k} {v.get('revision', '?')} (sha256 {v.get('sha256', '?')})"  # e.g. WordNet for WSD
                    for k, v in sorted(d.items()) if isinstance(v, dict))
    return f"{r.task}: {d.get('repo', '?')} @ {d.get('revision', '?')} ({d.get('source', '?')}{sha}){extra}"


def _fit(r: Result) -> str:
    if not r.record:
        return f"{r.variant}: {NOT_RECORDED}"
    variant = r.record["variant"] if isinstance(r.record.get("variant"), dict) else {}
    fit = r.record["fit"] if isinstance(r.record.get("fit"), dict) else {"fit_corpus": variant.get("fit_corpus")}
    params = _pairs(variant.get("params"))
    name = f"{variant.get('method', r.variant)}" + (f" ({params})" if params else "")
    if not fit.get("fit_corpus"):
        return f"{name}: nothing fitted"
    levels = sorted({f["level"] for f in fit.get("fits") or [] if isinstance(f, dict) and f.get("level")})
    level = "+".join(levels) or fit.get("level") or variant.get("level", "?")  # where it was fitted
    learned = [f["learned"] for f in fit.get("fits") or []
               if isinstance(f, dict) and isinstance(f.get("learned"), dict)]
    return (f"{name}: fit on {_corpus(fit)}, {level} level, seed {fit.get('seed', variant.get('seed', '?'))}"
            f"{_zeroed(learned)}{_kept(learned)}")


def _corpus(fit: dict[str, Any]) -> str:
    """What a fit corpus was: the evaluated task's texts (the same words for every task), a task's training
    split or a file (with its size and the SHA-256 of its texts); a sample says so."""
    corpus, splits = fit["fit_corpus"], list(fit.get("splits") or ["?"])
    lines = fit.get("n_lines")  # a file's non-empty lines, where repeated lines made fewer texts
    count = f"{lines} lines, {fit.get('n_texts', '?')} distinct texts" if lines not in (None, fit.get("n_texts")) \
        else f"{fit.get('n_texts', '?')} texts"
    size = f"{count}, sha256 {fit.get('texts_sha256', '?')}"
    where = {"task": f"the evaluated task's own texts (split{'s' * (len(splits) > 1)} {'+'.join(splits)}; "
                     "transductive)",
             "train": f"{fit.get('task', '?')}'s training texts (split{'s' * (len(splits) > 1)} {'+'.join(splits)}; "
                      f"{size})",
             "file": f"file {Path(str(fit.get('path', '?'))).name} ({size})"}.get(corpus, f"{corpus} ({size})")
    if fit.get("sample") is not None:
        where += f", a sample of at most {fit['sample']} texts (seed {fit.get('sample_seed', '?')})"
    return where


def _zeroed(learned: Sequence[dict[str, Any]]) -> str:
    """What clip zeroed, per fit: "none" says why a clip row equals raw."""
    zeroed = sorted({",".join(str(d) for d in state["dims_"]) or "none" for state in learned if "dims_" in state})
    return f"; dimensions zeroed: {' | '.join(zeroed)}" if zeroed else ""


def _kept(learned: Sequence[dict[str, Any]]) -> str:
    """What a fit did with directions or dimensions without variance, per fit, in the fields the method records:
    whitening (``n_components_``) keeps the others and drops them; zscore sets such dimensions to 0."""
    kept = set()
    for state in learned:
        dropped = state.get("dropped_")
        if isinstance(dropped, bool) or not isinstance(dropped, int) or dropped <= 0:
            continue
        of = f" of {state['dim_']}" if isinstance(state.get("dim_"), int) else ""
        if isinstance(state.get("n_components_"), int):
            kept.add(f"{state['n_components_']}{of} directions kept ({dropped} without variance dropped)")
        else:
            kept.add(f"{dropped}{of} dimensions without variance set to 0")
    return f"; {' | '.join(sorted(kept))}" if kept else ""
