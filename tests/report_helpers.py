"""Hand-written results folders for the reporter's tests: mteb TaskResult files with the runner's iso_bench
record (and its digest, ``result_sha256``; or the scores-only ``scores_sha256`` of an older file, or none), in plain
folders (``<model>/<revision>/<Task>.json``) or experiment folders (``<model>/<revision>/experiments/<setup>/
<Task>.json`` with a ``model_meta.json`` holding the setup); and the evaluation units beside a result
(``<Task>.instances.npz``, its ``instances`` and ``interval`` records: :func:`write_scored`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.numerics import stats
from iso_bench.results.result_files import DIGEST, SCORES_DIGEST, identity, result_digest, scores_digest

REV = "0123456789abcdef0123456789abcdef01234567"
ENV = {"device": "cuda", "hardware": "NVIDIA H100", "python": "3.11.7", "torch": "2.13.0", "transformers": "5.23.0",
       "mteb": "2.26.24", "platform": "Linux-6.8"}
DATA = {"STS12": ("mteb/sts12-sts", "a0d5"), "STSBenchmark": ("mteb/stsbenchmark-sts", "b0fd"),
        "Isotropy-STSB": ("mteb/stsbenchmark-sts", "b0fd")}
CMD_A = "iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB"
CMD_W = "iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB"


def record(base: str, variant: str, task: str, *, command: str | None, env: dict | None,
           fits: list | None = None, setup: dict | None = None, fit: dict | None = None) -> dict:
    """The iso_bench block of a result entry, as the runner writes it (environment/command optional: older files).

    ``setup`` sets the variant's fit corpus and seed (as the runner records them); ``fit`` adds to (or
    replaces parts of) the fit record, e.g. a file corpus's path, size and SHA-256.
    """
    repo, rev = DATA.get(task, ("mteb/other", "c0de"))
    fitted = variant != "raw"
    corpus, seed = (setup or {}).get("fit_corpus", "task"), (setup or {}).get("seed", 0)
    rec = {
        "iso_bench_version": "0.1.0", "model": base, "revision": REV,
        "extraction": {"pooling": "mean", "layer": -1, "normalize": True, "max_length": 256},
        "variant": {"method": variant, "params": {"n_components": None} if fitted else {}, "level": "sentence",
                    "fit_corpus": corpus, "seed": seed},
        "data": {"repo": repo, "revision": rev, "source": "mirror", "path": f"/home/someone/hub/{repo}",
                 "sha256": rev * 16},
        "fit": ({"fit_corpus": corpus, "task": task, "splits": ["test"], "n_texts": 10, "texts_sha256": "ff",
                 "seed": seed, "fits": fits or [], **(fit or {})} if fitted else {"fit_corpus": None}),
    }
    if env is not None:
        rec["environment"] = env
    if command is not None:
        rec["command"] = command
    return rec


def experiment_name(setup: dict[str, Any]) -> str:
    """mteb's folder name of an experiment: sorted ``k_v`` pairs joined by ``__`` (``fit_corpus_task__seed_0``)."""
    return "__".join(f"{k}_{v}" for k, v in sorted(setup.items()))


def write_result(root: Path, base: str, variant: str, task: str, main: float, *, metrics: dict | None = None,
                 command: str | None = CMD_A, env: dict | None = ENV, date: float | str = 1795313600.0,
                 meta: bool = True, fits: list | None = None, setup: dict | None = None, fit: dict | None = None,
                 folder_name: str | None = None, digest: bool | str = True) -> Path:
    """One mteb TaskResult file (and the model's model_meta.json) under ``root/results/``; its record holds the
    digest of the entry and its identity, as a run writes it; ``digest="older"``: the scores-only digest of
    iso-bench 0.1; false: none (a file of another model).

    With ``setup`` (mteb's experiment kwargs) the file goes to ``experiments/<folder_name or its name>/``,
    beside a ``model_meta.json`` holding the setup, as mteb writes it.
    """
    folder = root / "results" / f"{base}+{variant}".replace("/", "__") / REV
    model_meta: dict[str, Any] = {"name": f"{base}+{variant}", "revision": REV, "experiment_kwargs": None}
    if setup:
        folder = folder / "experiments" / (folder_name or experiment_name(setup))
        model_meta["experiment_kwargs"] = setup
    folder.mkdir(parents=True, exist_ok=True)
    if meta or setup:
        (folder / "model_meta.json").write_text(json.dumps(model_meta))
    entry = {**(metrics or {}), "main_score": main, "hf_subset": "default", "languages": ["eng-Latn"],
             "iso_bench": record(base, variant, task, command=command, env=env, fits=fits, setup=setup, fit=fit)}
    if digest == "older":
        entry["iso_bench"][SCORES_DIGEST] = scores_digest(entry)
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": DATA.get(task, ("", "c0de"))[1], "task_name": task,
                                "mteb_version": "2.26.24", "scores": {"test": [entry]}, "evaluation_time": 1.0,
                                "date": date}, indent=2))
    if digest is True:
        sign(path)
    return path


def identity_of(path: Path) -> dict[str, Any]:
    """The identity a reader finds for the result file ``path`` (model name, revision, setup, task)."""
    task = json.loads(path.read_text())["task_name"]
    if path.parent.parent.name == "experiments":
        meta = json.loads((path.parent / "model_meta.json").read_text())
        return identity(meta["name"], path.parents[2].name, meta["experiment_kwargs"], task)
    metas = sorted(path.parent.parent.glob("*/model_meta.json"))
    name = json.loads(metas[0].read_text())["name"] if metas else path.parent.parent.name.replace("__", "/")
    return identity(name, path.parent.name, {}, task)


def sign(path: Path) -> None:
    """Give every entry of the result file ``path`` the digest a run writes (:func:`result_digest`)."""
    data, ident = json.loads(path.read_text()), identity_of(path)
    for entries in data["scores"].values():
        for entry in entries:
            entry["iso_bench"][DIGEST] = result_digest(entry, ident)
    path.write_text(json.dumps(data, indent=2))


def small_case(root: Path, reverse: bool = False, setups: dict[str, dict] | None = None) -> Path:
    """org/alpha: raw, whiten and abtt on STS12, STSBenchmark and Isotropy-STSB.

    Hand-checked: raw 72.37 / 82.03, mean 77.20; whiten 65.47 (−6.90) / 79.93 (−2.10), mean 72.70 (−4.50);
    abtt ties raw on STS12 (both bold) and has no STSBenchmark result, so its mean is –, not 72.37.
    abtt's files are older (no environment, no command); whiten was run by another command on another day.
    ``setups``: the setup of a variant's files (experiment folders), by variant.
    """
    def put(*args: Any, **kwargs: Any) -> Path:
        return write_result(*args, **kwargs, setup=(setups or {}).get(args[2]))

    writes = [
        lambda: put(root, "org/alpha", "raw", "STS12", 0.7237),
        lambda: put(root, "org/alpha", "raw", "STSBenchmark", 0.8203),
        lambda: put(root, "org/alpha", "raw", "Isotropy-STSB", 0.766573,
                    metrics={"sentence_iw": 0.766573, "sentence_isoscore": 0.277153}),
        lambda: put(root, "org/alpha", "whiten", "STS12", 0.6547, command=CMD_W, date="2026-11-23T10:00:00"),
        lambda: put(root, "org/alpha", "whiten", "STSBenchmark", 0.7993, command=CMD_W),
        lambda: put(root, "org/alpha", "whiten", "Isotropy-STSB", 0.865,
                    metrics={"sentence_iw": 0.865, "sentence_isoscore": 1.0}, command=CMD_W),
        lambda: put(root, "org/alpha", "abtt", "STS12", 0.7237, command=None, env=None),
    ]
    for write in reversed(writes) if reverse else writes:
        write()
    return root


def set_record(path: Path, **fields: object) -> None:
    """Add ``fields`` to the iso_bench record of a result file (e.g. the ``task_type`` the runner writes)."""
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["iso_bench"].update(fields)
    path.write_text(json.dumps(data))
    if DIGEST in data["scores"]["test"][0]["iso_bench"]:
        sign(path)


def sts_units(n: int, noise: float, seed: int = 0, gold_seed: int = 0) -> np.ndarray:
    """STS units ``(n, 2)``: predicted similarity (gold plus ``noise`` × normal noise), gold (from ``gold_seed``)."""
    gold = np.random.default_rng(gold_seed).normal(size=n)
    return np.column_stack([gold + noise * np.random.default_rng(1000 + seed).normal(size=n), gold])


def main_of(units: np.ndarray, statistic: str = "spearman", strata: np.ndarray | None = None) -> float:
    """The statistic on every unit: the main score the units stand for."""
    idx = np.arange(units.shape[0])[None, :]
    named = {"spearman": lambda: stats.spearman(units, idx), "mean": lambda: stats.mean(units.reshape(-1), idx),
             "wmean": lambda: stats.wmean_spearman(units, idx, strata), "max_ap": lambda: stats.max_ap(units, idx)}
    return float(named[statistic]()[0])


def write_units(path: Path, units: np.ndarray, statistic: str = "spearman", *, strata: np.ndarray | None = None,
                n_resamples: int = 1000, seed: int = 0, interval: bool = True, key: str = "test/default") -> Path:
    """``<Task>.instances.npz`` beside the result file ``path`` (np.savez, one group ``key``) and, in the record of
    its entry, ``instances`` (file, sha256 of its bytes, key, statistic, n_units) and, unless ``interval`` is
    false, the ``interval`` :func:`iso_bench.numerics.stats.confidence_interval` gives with ``n_resamples`` and
    ``seed``."""
    npz = path.with_name(path.name.removesuffix(".json") + ".instances.npz")
    arrays = {f"{key}/units": np.asarray(units, dtype=np.float64), f"{key}/statistic": np.array(statistic),
              f"{key}/main_score": np.array(main_of(units, statistic, strata))}
    if strata is not None:
        arrays[f"{key}/strata"] = np.asarray(strata, dtype=np.int64)
    with npz.open("wb") as f:
        np.savez(f, **arrays)
    data = json.loads(path.read_text())
    rec = data["scores"]["test"][0]["iso_bench"]
    rec["instances"] = {"file": npz.name, "sha256": hashlib.sha256(npz.read_bytes()).hexdigest(), "key": key,
                        "statistic": statistic, "n_units": int(units.shape[0])}
    rec.pop("interval", None)
    if interval:
        ci = stats.confidence_interval(units, statistic, n_resamples=n_resamples, seed=seed, strata=strata)
        rec["interval"] = {"estimate": ci.estimate, "low": ci.low, "high": ci.high, "level": ci.level,
                           "n_resamples": ci.n_resamples, "seed": ci.seed, "method": ci.method,
                           "n_undefined": ci.n_undefined}
    path.write_text(json.dumps(data, indent=2))
    if DIGEST in rec:
        sign(path)
    return npz


def write_scored(root: Path, base: str, variant: str, task: str, units: np.ndarray, statistic: str = "spearman",
                 *, n_resamples: int = 1000, seed: int = 0, interval: bool = True, **kwargs: Any) -> Path:
    """A result whose main score is the statistic on ``units``, with its units file and records (as a run writes
    them); ``kwargs`` go to :func:`write_result`."""
    path = write_result(root, base, variant, task, main_of(units, statistic), **kwargs)
    write_units(path, units, statistic, n_resamples=n_resamples, seed=seed, interval=interval)
    return path
