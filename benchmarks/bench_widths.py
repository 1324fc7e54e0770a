"""What the widths of LLM embedders (1,024 to 4,096 dimensions) cost iso-bench: time, peak memory and disk per method.

    python benchmarks/bench_widths.py --data-dir ../shared/data [--dims 1024 4096]
        [--tasks mteb-sts WiC] [--methods raw whiten ...] [--threads 2] [--work DIR] [--keep-cache]
        [--wsd-sample 400] [--json FILE] [--quick]
    python benchmarks/bench_widths.py --cache-only DIM CACHE

For each width, a 1-layer stand-in of an LLM embedder is made from a config (random weights, seeded): a
``Qwen3Model`` of that hidden size with its MLP and attention heads shrunk (intermediate size 256, 2 query heads and
1 key-value head of 64 dimensions: the methods see only the width), all-MiniLM-L6-v2's tokenizer, saved as a local
sentence-transformers folder (Transformer, last-token Pooling, Normalize), as Qwen3-Embedding is laid out. Then,
each in its own process (``iso-bench run``, its peak resident memory from ``wait4``):

1. ``encode``: raw and ``zscore-level=token`` from an empty raw-vector cache: every sentence, token and
   target-word vector of the tasks encoded in one forward pass per text, and written; its raw-vector cache is
   then measured per kind (bytes per 1,000 texts, token rows per text, the shards' storage precision), and what
   the same shards take for a model run in bfloat16 (one shard per kind rounded to bfloat16 and written again
   by the store, which keeps such vectors in 16 bits; span vectors, float32 means, stay float32);
2. every default method alone (``--methods``), reading that cache; the fit cache is off
   (``ISO_BENCH_NO_FIT_CACHE=1``) so each process fits; a method refused for a reason of its own mathematics
   (whitening 4,096 dimensions on fewer vectors) is said in one line and counted, not hidden.

Last, at the largest width, WSD-ALL's SemCor: ``--wsd-sample`` SemCor sentences (seeded) are encoded into an empty
cache with their token vectors, and the whole of SemCor is extrapolated from them by its token count (counted
with the tokenizer over every sentence): bytes of token vectors, encode time, the float32 bytes of its 224,716
target words' span vectors, and of the token vectors of a token-level fit's sample at the default fit budget
(25,000 sentences: the held-out setting; cluster-pca holds at most ``TOKEN_FIT_VALUES`` values and samples fewer).

The run prints one line per process and ends with a markdown table per width (seconds, CPU seconds and their ratio
to raw's process, the goal beside it: 3, or 6 for cluster-pca, zipfian-whiten and flow; peak RSS in GB, results
present / expected, the first refusal). ``--keep-cache`` reuses the raw-vector cache a run left in ``--work`` (same
stand-in, same extraction), so a second measurement of the methods skips the cold encode. ``--json`` writes every
figure. ``--cache-only DIM CACHE`` prints the cache lines of a cache folder a run left in ``--work``. ``--quick``:
1,024 dimensions, STS16, four methods, a 50-sentence SemCor sample (a smoke run of a few minutes). The tasks by
default are the seven STS tasks of ``mteb-sts`` and WiC; ``--tasks SICK-R`` (6,077 texts, enough to whiten 4,096
dimensions) is the goals' one-task run. Nothing is asserted: the machine may be shared; ratios between methods,
measured in one invocation, are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TASKS = ("mteb-sts", "WiC")  # the 7 STS tasks (29,023 texts) and WiC
SLOW = ("cluster-pca", "zipfian-whiten", "flow")  # methods whose goal is 6 times raw's CPU seconds, not 3
DIMS = (1024, 4096)
WSD_SAMPLE = 400
FIT_SAMPLE = 25_000  # SemCor sentences a token-level fit reads at the default budget (100,000 / 4)


def default_methods() -> list[str]:
    from iso_bench.results.benchmark import DEFAULT_METHODS

    return list(DEFAULT_METHODS)


def stand_in(folder: Path, dim: int, dtype: str = "float32") -> Path:
    """A 1-layer ``dim``-d Qwen3 stand-in as a sentence-transformers folder (made once; reused when present)."""
    target = folder / f"standin-{dim}-{dtype}"
    if (target / "modules.json").exists():
        return target
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=tokenizer.vocab_size, hidden_size=dim, intermediate_size=256, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id)
    model = Qwen3Model(config).to(getattr(torch, dtype))
    hf = folder / f"hf-{dim}-{dtype}"
    model.save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=256)
    st = SentenceTransformer(modules=[transformer, Pooling(dim, pooling_mode="lasttoken"), Normalize()],
                             device="cpu")
    st.save(str(target))
    shutil.rmtree(hf)
    return target


def child(argv: list[str], log: Path, env: dict[str, str]) -> dict:
    """Run ``argv`` in a process of its own; its seconds, peak RSS (GB) and exit status, its output in ``log``."""
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_gb": round(usage.ru_maxrss / 2**20, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "rc": proc.returncode}


def results_present(folder: Path) -> int:
    """How many result files (one per variant and task) a run wrote."""
    return sum(1 for p in folder.rglob("*.json") if p.name != "model_meta.json" and "instances" not in p.parts)


def refusals(log: Path) -> list[str]:
    """The lines of a run's output that say a result failed or was refused."""
    lines = log.read_text(errors="replace").splitlines()
    keys = ("error", "refus", "failed", "cannot", "Traceback", "Killed", "MemoryError", "too few")
    return [line.strip() for line in lines if any(k in line for k in keys) and "shown as" not in line][:8]


def cache_figures(cache: Path) -> dict:
    """Per kind of the one namespace in ``cache``: entries, shard bytes, rows, bytes per 1,000 entries and the
    data members' storage precision."""
    (index,) = list(cache.rglob("index.sqlite"))
    db = sqlite3.connect(index)
    out = {}
    for kind, entries, size, rows in db.execute("SELECT kind, sum(entries), sum(bytes), sum(rows) FROM shards "
                                                 "GROUP BY kind"):
        out[kind] = {"entries": entries, "bytes": size, "rows": rows, "bytes_per_1000": round(size / entries * 1000),
                     "rows_per_entry": round(rows / entries, 2), "storage": storage_of(index.parent, kind)}
    db.close()
    return out


def sixteen_bit(cache: Path) -> dict:
    """Per kind, the bytes per 1,000 entries a bfloat16 forward pass's shards would take: one shard of the kind
    read, its values rounded to bfloat16 (their size is what is measured; span vectors, means computed in float32,
    are not rounded, so they stay float32) and written again by the store's own ``write_shard`` for a bfloat16
    extraction, its size over the float32 shard's applied to the kind's measured bytes."""
    import tempfile

    import numpy as np

    from iso_bench.vectors.shards import read_shard, write_shard

    (index,) = list(cache.rglob("index.sqlite"))
    measured, out = cache_figures(cache), {}
    for kind, figures in measured.items():
        shard = max(index.parent.glob(f"{kind}-*.npz"), key=lambda p: p.stat().st_size)
        entries = read_shard(shard)
        rounded = [v if kind == "span" else (v.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
                   for v in entries.values()]  # span vectors are float32 means of 16-bit rows: they stay float32
        with tempfile.TemporaryDirectory() as tmp:
            info = write_shard(Path(tmp) / shard.name, list(entries), rounded, "bfloat16")
            ratio = (Path(tmp) / shard.name).stat().st_size / shard.stat().st_size
        out[kind] = {"storage": info.storage, "ratio": round(ratio, 4),
                     "bytes_per_1000": round(figures["bytes_per_1000"] * ratio)}
    return out


def storage_of(folder: Path, kind: str) -> str:
    """The dtype of one shard's ``data`` member (what the store keeps vectors of ``kind`` in)."""
    import numpy as np

    shard = next(folder.glob(f"{kind}-*.npz"), None)
    if shard is None:
        return "-"
    with np.load(shard) as z:
        return str(z["data"].dtype)


def wsd_sample(model: Path, n: int, work: Path, threads: int, seed: int = 0) -> dict:
    """In this process (a child of the benchmark): SemCor's sentences, ``n`` of them encoded with their token vectors
    into an empty cache, and the whole extrapolated by token count."""
    import numpy as np
    import torch

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.kinds.wsd.data import WordNetSenses, framework_paths, load_corpus
    from iso_bench.vectors.store import EmbeddingStore

    torch.set_num_threads(threads)
    data = Path(os.environ["ISO_BENCH_DATA_DIR"])
    wordnet = WordNetSenses.from_index(data / "nltk_data/corpora/wordnet")
    semcor = load_corpus(*framework_paths(data / "wsd/WSD_Evaluation_Framework", "semcor"), wordnet=wordnet,
                         underscores_as_spaces=True)
    sentences = list(dict.fromkeys(semcor.sentences.values()))
    backbone = load_backbone(str(model), device="cpu")
    cache = work / f"wsd-cache-{backbone.dim}"
    shutil.rmtree(cache, ignore_errors=True)
    store = EmbeddingStore(backbone, cache, kinds=("sentence", "tokens"), progress=False)
    rows_all = np.array([len(ids) for ids in store.token_ids(sentences)], dtype=np.int64)
    pick = np.sort(np.random.default_rng(seed).choice(len(sentences), size=min(n, len(sentences)), replace=False))
    started = time.perf_counter()
    store.ensure([sentences[i] for i in pick])
    seconds = time.perf_counter() - started
    figures = cache_figures(cache)
    tokens = figures["tokens"]
    per_row = tokens["bytes"] / tokens["rows"]
    mean_rows = float(rows_all.mean())
    shutil.rmtree(cache, ignore_errors=True)
    return {"dim": backbone.dim, "sentences": len(sentences), "sample": len(pick),
            "sample_rows": tokens["rows"], "rows_total": int(rows_all.sum()), "rows_per_sentence": round(mean_rows, 2),
            "bytes_per_row": round(per_row, 1), "tokens_gb": round(per_row * rows_all.sum() / 1e9, 2),
            "sentence_gb": round(figures["sentence"]["bytes"] / len(pick) * len(sentences) / 1e9, 3),
            "instances": len(semcor), "span_gb": round(len(semcor) * backbone.dim * 4 / 1e9, 2),  # float32 rows
            "encode_seconds_sample": round(seconds, 1),
            "encode_seconds_total": round(seconds * rows_all.sum() / tokens["rows"], 0),
            "fit_sample_rows": round(mean_rows * min(FIT_SAMPLE, len(sentences))),
            "fit_sample_gb_float32": round(mean_rows * min(FIT_SAMPLE, len(sentences)) * backbone.dim * 4 / 1e9, 2),
            "storage": tokens["storage"]}


def run_width(dim: int, args: argparse.Namespace, env: dict[str, str], work: Path) -> dict:
    model = stand_in(work, dim, args.dtype)
    cache, logs = work / f"cache-{dim}", work / f"logs-{dim}"
    logs.mkdir(parents=True, exist_ok=True)
    if not args.keep_cache:
        shutil.rmtree(cache, ignore_errors=True)
    base = [sys.executable, "-m", "iso_bench.cli", "run", "--model", str(model), "--tasks", *args.tasks,
            "--cache-dir", str(cache), "--threads", str(args.threads), "--no-progress", "--kernels", "avx2"]
    if args.data_dir:
        base += ["--data-dir", args.data_dir]
    rows: dict[str, dict] = {}
    for name, methods in [("encode", ["raw", "zscore-level=token"]), *[(m, [m]) for m in args.methods]]:
        results = work / f"results-{dim}" / name
        shutil.rmtree(results, ignore_errors=True)
        log = logs / f"{name}.log"
        run_env = env if name == "encode" else {**env, "ISO_BENCH_NO_FIT_CACHE": "1"}
        row = child([*base, "--methods", *methods, "--results", str(results)], log, run_env)
        row.update(results=results_present(results), expected=len(methods) * n_tasks(args.tasks), refused=refusals(log))
        rows[name] = row
        if "raw" in rows and name != "encode":
            row["cpu_vs_raw"] = round(row["cpu_seconds"] / max(rows["raw"]["cpu_seconds"], 0.1), 2)
        print(f"{dim}-d {name:<16} {row['seconds']:>8.1f} s ({row['cpu_seconds']:.0f} s CPU"
              + (f", {row['cpu_vs_raw']:.2f} x raw's" if "cpu_vs_raw" in row else "") + ")  "
              f"{row['peak_rss_gb']:>6.2f} GB  results {row['results']}/{row['expected']}  rc {row['rc']}"
              + (f"  | {row['refused'][0][:150]}" if row["refused"] else ""), flush=True)
        if name == "encode":
            rows[name]["cache"], rows[name]["cache_bfloat16"] = cache_figures(cache), sixteen_bit(cache)
            print_cache(dim, rows[name]["cache"], rows[name]["cache_bfloat16"])
    out = {"dim": dim, "model": str(model), "runs": rows}
    if dim == max(args.dims) and args.wsd_sample:
        log = logs / "wsd.log"
        row = child([sys.executable, __file__, "--wsd-child", str(model), str(args.wsd_sample), str(work),
                     str(args.threads)], log, env)
        text = log.read_text(errors="replace").strip().splitlines()
        out["wsd"] = {**row, **(json.loads(text[-1]) if row["rc"] == 0 and text else {"error": text[-3:]})}
        print(f"{dim}-d WSD-ALL SemCor: {json.dumps(out['wsd'])}", flush=True)
    return out


def print_cache(dim: int, figures: dict, half: dict) -> None:
    for kind, c in figures.items():
        print(f"{dim}-d cache {kind:<8} {c['entries']:>7,} entries  {c['bytes'] / 1e6:>9.1f} MB  "
              f"{c['bytes_per_1000'] / 1e6:>8.2f} MB per 1,000 ({c['rows_per_entry']} rows each, {c['storage']}); "
              f"in bfloat16 {half[kind]['bytes_per_1000'] / 1e6:.2f} MB ({half[kind]['ratio']:.3f}x)", flush=True)


def n_tasks(names: list[str]) -> int:
    """How many tasks ``names`` (task, suite or benchmark names) resolve to."""
    from iso_bench.grid.tasks import resolve

    return len(resolve(names))


def table(width: dict) -> str:
    """The width's markdown table: seconds, CPU seconds and their ratio to raw's (the goal: at most 3, 6 for
    :data:`SLOW`), peak RSS, results present of expected, the first refusal."""
    lines = [f"| {width['dim']}-d: method | seconds (CPU) | CPU / raw's (goal) | peak RSS (GB) | results | refused |",
             "|---|---|---|---|---|---|"]
    for name, row in width["runs"].items():
        note = row["refused"][0][:120].replace("|", "/") if row["refused"] else ""
        ratio = (f"{row['cpu_vs_raw']:.2f} ({6 if name in SLOW else 3})" if "cpu_vs_raw" in row and name != "raw"
                 else "")
        lines.append(f"| {name} | {row['seconds']:.1f} ({row['cpu_seconds']:.0f}) | {ratio} | "
                     f"{row['peak_rss_gb']:.2f} | {row['results']}/{row['expected']} | {note} |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--cache-only"]:  # the cache lines of a benchmark's cache folder left in place
        cache = Path(sys.argv[3])
        print_cache(int(sys.argv[2]), cache_figures(cache), sixteen_bit(cache))
        return
    if sys.argv[1:2] == ["--wsd-child"]:
        model, n, work, threads = sys.argv[2:6]
        print(json.dumps(wsd_sample(Path(model), int(n), Path(work), int(threads))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--dims", type=int, nargs="+", default=list(DIMS))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=None, help="default: every default method")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="the precision the stand-in is saved (and so loaded and run) in")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default=None, help="folder for stand-ins, caches and logs (default: a temporary one)")
    parser.add_argument("--wsd-sample", type=int, default=WSD_SAMPLE, help="SemCor sentences encoded (0: none)")
    parser.add_argument("--json", default=None, help="write every figure to this file")
    parser.add_argument("--keep-cache", action="store_true",
                        help="reuse the raw-vector cache a run left in --work (the encode process is then warm)")
    parser.add_argument("--quick", action="store_true", help="1,024-d, STS16, 4 methods, 50 SemCor sentences")
    args = parser.parse_args()
    if args.quick:
        args.dims, args.tasks, args.wsd_sample = [1024], ["STS16"], min(args.wsd_sample, 50)
        args.methods = args.methods or ["raw", "whiten", "cluster-pca", "zipfian-whiten"]
    args.methods = args.methods or default_methods()
    if args.data_dir:
        os.environ["ISO_BENCH_DATA_DIR"] = args.data_dir
    work = Path(args.work) if args.work else Path(__import__("tempfile").mkdtemp(prefix="bench-widths-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}\nwork folder: {work}", flush=True)
    report = []
    for dim in args.dims:
        report.append(run_width(dim, args, env, work))
        if args.json:  # after each width: a run stopped later keeps what it measured
            Path(args.json).write_text(json.dumps(report, indent=1))
    print()
    for width in report:
        print(table(width) + "\n")


if __name__ == "__main__":
    main()
