"""How time and memory grow with the size of a task: iso-bench's run at 10^4, 10^5 and 10^6 texts.

    python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--token-sizes 10000 100000] [--dim 128]

The model is a synthetic backbone in the benchmark's own process: deterministic pseudo-random anisotropic
vectors (a common mean direction, a decaying spectrum and three outlier dimensions, like a masked language
model's), drawn from fixed tables by a hash of each text, so that encoding costs next to nothing and what is
measured is iso-bench itself: the raw-vector store, the fits (streamed or sampled past the fit budget), the
transforms, mteb's evaluation and the intervals. Every text has 20 token vectors.

Runs, each in a fresh subprocess (its peak RSS is its own):

- ``sentence n``: ``iso_bench.grid.runner.run`` with raw and every default sentence-level method on a real mteb
  retrieval task (SciFact's task class and metadata) whose data is built in memory: 1,000 queries, n documents;
- ``tokens n``: raw and every default token-level method on an STS task (STSBenchmark's class) of n texts
  (n/2 pairs of 20-token texts);
- ``mteb n``: mteb alone (``mteb.evaluate``) on the retrieval task of the largest size, with an encoder that
  returns the synthetic backbone's raw vectors: the memory a plain mteb evaluation needs.

It prints one row per run (seconds, peak RSS), then:

    scale time: X          t(sentence, 10^6) / t(sentence, 10^5); linear growth is 10
    scale time tokens: Z   t(tokens, 10^5) / t(tokens, 10^4)
    scale memory: Y        peak RSS of sentence 10^6 / peak RSS of mteb 10^6

Nothing is asserted; the ratios come from one run of this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

TOKENS = 20  # token vectors per text
TABLE = 1 << 16  # rows of the tables vectors are drawn from


class SyntheticBackbone:
    """Anisotropic vectors from a hash of each text; the interface iso-bench's store expects of a backbone."""

    model_id = "iso-bench/synthetic-anisotropic"
    revision = "synthetic-1"
    device = "cpu"
    kinds = ("sentence", "tokens")

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        rng = np.random.default_rng(0)
        scale = (1.0 / np.sqrt(np.arange(1, dim + 1))).astype(np.float32)  # a decaying spectrum
        mean = rng.normal(size=dim).astype(np.float32) * 2.0  # a common direction: the cone
        outliers = np.zeros(dim, np.float32)
        outliers[[3, 17, 41 % dim]] = 12.0  # rogue dimensions
        self.table = (rng.normal(size=(TABLE, dim)).astype(np.float32) * scale + mean + outliers).astype(np.float32)
        self.extraction = types.SimpleNamespace(key=lambda: "synthetic-mean", normalize=False,
                                                to_dict=lambda: {"pooling": "synthetic-mean"})

    def describe(self) -> dict[str, Any]:
        return {"model": self.model_id, "revision": self.revision, "extraction": {"pooling": "synthetic-mean"}}

    def prompt_context(self, task_metadata: Any = None, prompt_type: Any = None) -> None:
        return None

    def _rows(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), TOKENS)`` table rows: a text's tokens are fixed by its hash."""
        h = np.array([int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in texts],
                     dtype=np.uint64)
        steps = np.arange(TOKENS, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return ((h[:, None] + steps[None, :]) % np.uint64(TABLE)).astype(np.int64)

    def encode(self, texts: list[str], *, kinds: Any = ("sentence",), spans: Any = None, batch_size: int = 32,
               progress: bool = False, desc: str = "", **_: Any) -> dict[str, list[np.ndarray]]:
        rows = self._rows(list(texts))
        out: dict[str, list[np.ndarray]] = {}
        if "sentence" in kinds:  # two table rows per text: cheap, and distinct for distinct texts
            out["sentence"] = list(self.table[rows[:, 0]] + 0.5 * self.table[rows[:, 1]])
        if "tokens" in kinds:
            out["tokens"] = [self.table[r] for r in rows]
        return out


def _texts(prefix: str, n: int) -> list[str]:
    return [f"{prefix} {i} of the synthetic corpus" for i in range(n)]


def retrieval_task(n_docs: int, n_queries: int) -> Any:
    """A real mteb retrieval task object (SciFact's class and metadata) holding synthetic data built in memory."""
    import datasets
    import mteb

    base = type(mteb.get_task("SciFact"))

    class SyntheticRetrieval(base):  # type: ignore[misc,valid-type]
        data_dir = None

        def load_data(self, **kwargs: Any) -> None:
            docs = _texts("document", n_docs)
            queries = _texts("query", n_queries)
            rng = np.random.default_rng(1)
            qrels = {f"q{i}": {f"d{j}": 1 for j in rng.choice(n_docs, 2, replace=False).tolist()}
                     for i in range(n_queries)}
            split = {"corpus": datasets.Dataset.from_dict({"id": [f"d{i}" for i in range(n_docs)],
                                                           "title": [""] * n_docs, "text": docs}),
                     "queries": datasets.Dataset.from_dict({"id": [f"q{i}" for i in range(n_queries)],
                                                            "text": queries}),
                     "relevant_docs": qrels, "top_ranked": None}
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def source_record(self) -> dict[str, Any]:
            return {"source": "synthetic", "n_documents": n_docs, "n_queries": n_queries}

    return SyntheticRetrieval()


def sts_task(n_texts: int) -> Any:
    """A real mteb STS task object (STSBenchmark's class and metadata) of ``n_texts / 2`` synthetic pairs."""
    import datasets
    import mteb

    base = type(mteb.get_task("STSBenchmark"))

    class SyntheticSTS(base):  # type: ignore[misc,valid-type]
        data_dir = None

        def load_data(self, **kwargs: Any) -> None:
            n = n_texts // 2
            rng = np.random.default_rng(2)
            split = datasets.Dataset.from_dict({"sentence1": _texts("first", n), "sentence2": _texts("second", n),
                                                "score": rng.uniform(0, 5, n).round(2).tolist()})
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def source_record(self) -> dict[str, Any]:
            return {"source": "synthetic", "n_pairs": n_texts // 2}

    return SyntheticSTS()


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def child(job: dict[str, Any]) -> dict[str, Any]:
    """One run in this (fresh) process; returns its seconds and peak RSS."""
    import iso_bench.grid.runner
    from iso_bench.backbones.loader import HF, Resolved
    from iso_bench.grid.runner import RunConfig, run
    from iso_bench.methods import make_method
    from iso_bench.results.benchmark import DEFAULT_METHODS

    backbone = SyntheticBackbone(job["dim"])
    n = job["n"]
    if job["kind"] == "mteb":
        import mteb
        from mteb.models.abs_encoder import AbsEncoder

        class RawSynthetic(AbsEncoder):
            def __init__(self) -> None:
                self.mteb_model_meta = None

            def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
                       prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
                texts = [t for batch in inputs for t in batch["text"]]
                return np.stack(backbone.encode(texts, kinds=("sentence",))["sentence"])

        task = retrieval_task(n, job["queries"])
        started = time.perf_counter()
        mteb.evaluate(RawSynthetic(), task, cache=None, show_progress_bar=False)
        return {"seconds": time.perf_counter() - started, "peak_gb": _peak_gb()}

    levels = {spec: make_method(spec)[1] for spec in DEFAULT_METHODS}
    level = "sentence" if job["kind"] == "sentence" else "token"
    methods = ["raw", *[s for s, lv in levels.items() if lv == level and s != "raw"]]
    task = retrieval_task(n, job["queries"]) if job["kind"] == "sentence" else sts_task(n)
    task.load_data()
    iso_bench.grid.runner.build_backbone = lambda cfg: backbone
    iso_bench.grid.runner.revision_of = lambda cfg: backbone.revision
    iso_bench.grid.runner.build_task = lambda ref: task
    iso_bench.grid.runner.describe_model = lambda *a, **k: Resolved(backbone.model_id, HF, False, backbone.revision,
                                                                    width=backbone.dim, token_width=backbone.dim)
    with tempfile.TemporaryDirectory(prefix="iso-bench-scale-", dir=job.get("tmp")) as tmp:
        cfg = RunConfig(model=backbone.model_id, methods=methods, tasks=[task.metadata.name],
                        results_dir=Path(tmp) / "results", cache_dir=Path(tmp) / "cache", progress=False, threads=1)
        started = time.perf_counter()
        summary = run(cfg)
        seconds = time.perf_counter() - started
        failed = {label: {t: str(e) for t, e in errs.items()} for label, errs in summary.errors.items()}
    return {"seconds": seconds, "peak_gb": _peak_gb(), "methods": methods, "errors": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="documents of the retrieval task (default: 10^4 10^5 10^6)")
    parser.add_argument("--token-sizes", type=int, nargs="+", default=[10_000, 100_000],
                        help="texts of the STS task for token-level methods (default: 10^4 10^5)")
    parser.add_argument("--queries", type=int, default=1000, help="queries of the retrieval task (default: 1000)")
    parser.add_argument("--dim", type=int, default=384,
                        help="dimension of the synthetic vectors (default: 384, all-MiniLM-L6-v2's, which the "
                        "default methods assume)")
    parser.add_argument("--tmp", default=None, help="folder for the runs' caches and results (default: the system's)")
    kinds = ["sentence", "tokens", "mteb"]
    parser.add_argument("--runs", nargs="+", choices=kinds, default=kinds, help="which runs (default: all three)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))), flush=True)
        return

    jobs = [*({"kind": "sentence", "n": n} for n in args.sizes),
            *({"kind": "tokens", "n": n} for n in args.token_sizes), {"kind": "mteb", "n": max(args.sizes)}]
    jobs = [job for job in jobs if job["kind"] in args.runs]
    print(f"synthetic backbone: {args.dim}-d, {TOKENS} tokens per text; retrieval with {args.queries} queries; "
          f"one fresh process per run", flush=True)
    print(f"\n{'run':<10}{'n':>10}{'seconds':>10}{'peak RSS GB':>13}  methods")
    found: dict[tuple[str, int], dict[str, Any]] = {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    for job in jobs:
        job = {**job, "queries": args.queries, "dim": args.dim, "tmp": args.tmp}
        proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], capture_output=True, text=True,
                              env=env, check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            print(f"{job['kind']:<10}{job['n']:>10}  failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}",
                  flush=True)
            continue
        out = found[(job["kind"], job["n"])] = json.loads(line[len("RESULT "):])
        print(f"{job['kind']:<10}{job['n']:>10}{out['seconds']:>10.1f}{out['peak_gb']:>13.2f}  "
              f"{' '.join(out.get('methods', ['(mteb alone, raw)']))}", flush=True)
        for label, errs in (out.get("errors") or {}).items():
            print(f"  {label} failed: {errs}", flush=True)

    def ratio(a: tuple[str, int], b: tuple[str, int], key: str) -> str:
        return f"{found[a][key] / found[b][key]:.2f}" if a in found and b in found else "n/a (a run failed)"

    big, mid = max(args.sizes), sorted(args.sizes)[-2] if len(args.sizes) > 1 else max(args.sizes)
    tbig, tsmall = max(args.token_sizes), min(args.token_sizes)
    print(f"\nscale time: {ratio(('sentence', big), ('sentence', mid), 'seconds')}")
    print(f"scale time tokens: {ratio(('tokens', tbig), ('tokens', tsmall), 'seconds')}")
    print(f"scale memory: {ratio(('sentence', big), ('mteb', big), 'peak_gb')}")


if __name__ == "__main__":
    main()
