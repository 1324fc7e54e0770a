"""What N variants cost over one, and what a rerun costs, measured in one process side by side.

    python benchmarks/bench_variants.py --data-dir ../shared/data [--model ID | --tiny-model] [--threads 2]
        [--device cpu] [--batch-size 32] [--encode-only]

Four runs of ``iso_bench.grid.runner.run`` with the default settings (every default method, the 7 MTEB STS tasks,
bootstrap intervals of 1,000 resamples), at a fixed, printed thread count:

1. raw alone, cold: an empty raw-vector cache and results folder;
2. raw + every method, cold: another empty cache (raw vectors and fits) and results folder;
3. warm, results kept: run 2 again (nothing is missing, so nothing is done);
4. warm, results deleted: run 2's results removed, its caches kept (every evaluation again, no encode; it
   prints how many fits it ran, which must be 0).

Each run's time is broken down by phase (exclusive: a phase inside another counts once): model loading,
dataset loading, the model's forward passes (the time inside the model's transformers modules, timed by
torch's global module hooks), the rest of encoding (tokenizing, token extraction, cache writes), reading raw vectors
for fits, fits per method, the fit cache, transforms, bootstrap intervals, result writing; "mteb evaluation
and the rest" is what is left (mteb's scoring, planning, file checks). Imports are paid once, before run 1,
and printed apart. The output ends with three lines:

    ratio cold: X    (run 2 / run 1)
    ratio warm: Y    (run 4 / run 2)
    overhead: Z      (run 2's seconds outside the forward passes minus run 1's, over run 2's forward passes)

Beside them, in the same process, the floor: plain ``SentenceTransformer.encode`` of the same distinct texts (every
task's, deduplicated) at the same batch size on the same device, against iso-bench's encode of them into an empty
raw-vector store (shard writes included), for sentence vectors, with token vectors kept, and with token vectors and
the rows the pooling reads (what a run with token-level variants encodes), alternated ``--repeats`` times (plain,
sentence, tokens, pooled; then the reverse), with the bytes each store wrote:

    encode vs sentence-transformers: X                       (iso-bench's raw encode / plain encode)
    encode vs sentence-transformers, with token vectors: X'
    encode vs sentence-transformers, with token vectors and pooled rows (...): X''
    variants vs sentence-transformers: Y                     (the cold run with every method / plain encode)
    variants vs sentence-transformers, CPU time: Y'          (the same in this process's CPU seconds)

``--tiny-model`` runs a 1-layer, 64-d BERT with all-MiniLM-L6-v2's tokenizer (random weights, seeded), saved as a
sentence-transformers folder (mean pooling, Normalize): a model whose forward costs next to nothing, so what is left
is iso-bench's own work. ``--tiny-dim 384`` makes it as wide as all-MiniLM-L6-v2, so that the methods work on
vectors of its size; a method the width does not allow is left out and named. The same ratios in this process's CPU
time are printed too: on a machine shared with other jobs they move less than wall time (on the CPU; on a GPU wall
time is what counts). ``--threads 1`` also keeps the tokenizer on one thread (``TOKENIZERS_PARALLELISM=false``
unless set): a tokenizer call over a whole request otherwise waits on a second core that other jobs keep busy.
``--encode-only`` measures the encode lines alone (no runs).

The overhead's numerator and denominator come from the same runs, so the machine's load moves them together;
model and dataset loading are left out of both runs' seconds (they do not depend on the methods).

Nothing is asserted: timings on shared machines are noisy; the ratios are measured in one process. Where the
machine's speed drifts during the benchmark (other tenants), ``--repeats 2`` runs the cold runs in the order raw,
all, all, raw (``--repeats K`` alternates K pairs), which cancels a steady drift: the cold ratio is then the sum of
the "raw + every method" times over the sum of the "raw alone" times, and each pair's own ratio is printed too.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

started = time.perf_counter()
# imports are paid once, before run 1, and timed apart: among them those a run makes lazily (sentence-transformers
# alone takes ~5 s), which would otherwise weigh on run 1 only; iso_bench first, so that numpy's OpenBLAS is pinned
import iso_bench  # noqa: E402,F401

# isort: split
import mteb  # noqa: E402,F401
import mteb.evaluate  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401
import sentence_transformers  # noqa: E402,F401
import sklearn.metrics  # noqa: E402,F401
import torch  # noqa: E402,F401

from iso_bench.grid.runner import RunConfig, RunSummary, run  # noqa: E402
from iso_bench.mteb_plugin import DEFAULT_MODEL  # noqa: E402
from iso_bench.results.benchmark import DEFAULT_METHODS  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - started
PHASES = ["model loading", "dataset loading", "forward passes", "encode: all but the forward passes",
          "fit: reading raw vectors", "fit cache", "fits", "transforms",
          "bootstrap intervals", "result writing"]


class Phases:
    """Exclusive wall time per phase: functions are wrapped, and a phase inside another counts once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []  # per open phase: [start, time of phases inside it]

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name, None)
        if original is None or getattr(original, "_bench_phase", None):  # absent in this version, or wrapped
            return

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return original(*args, **kwargs)
            finally:
                self._stack.pop()
                spent = time.perf_counter() - frame[0]
                self.seconds[phase] += spent - frame[1]
                if self._stack:
                    self._stack[-1][1] += spent

        timed._bench_phase = phase  # type: ignore[attr-defined]
        setattr(owner, name, timed)

    def begin(self) -> None:
        self._stack.append([time.perf_counter(), 0.0])

    def end(self, phase: str) -> None:
        frame = self._stack.pop()
        spent = time.perf_counter() - frame[0]
        self.seconds[phase] += spent - frame[1]
        if self._stack:
            self._stack[-1][1] += spent

    def take(self) -> dict[str, float]:
        out, self.seconds = dict(self.seconds), defaultdict(float)
        return out


def time_forward_passes(phases: Phases) -> None:
    """The time inside the model's modules counts as the phase "forward passes", through torch's global module
    hooks: from the start of an outermost call of a transformers module to its end (a model whose top module is
    called through ``forward`` directly, as sentence-transformers does, counts its embeddings, encoder and
    pooler calls); on a GPU the time waits for the device."""
    depth = [0]

    def ours(module: Any) -> bool:
        return type(module).__module__.startswith("transformers.")

    def sync() -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def before(module: Any, args: Any) -> None:
        if ours(module):
            if depth[0] == 0:
                sync()
                phases.begin()
            depth[0] += 1

    def after(module: Any, args: Any, output: Any) -> None:
        if ours(module):
            depth[0] -= 1
            if depth[0] == 0:
                sync()
                phases.end("forward passes")

    torch.nn.modules.module.register_module_forward_pre_hook(before)
    torch.nn.modules.module.register_module_forward_hook(after)


def instrument(phases: Phases) -> None:
    import iso_bench.fitting
    import iso_bench.grid.runner
    import iso_bench.mteb_plugin
    import iso_bench.results.instances
    from iso_bench.methods import METHODS
    from iso_bench.vectors.store import EmbeddingStore

    time_forward_passes(phases)
    phases.wrap(iso_bench.grid.runner, "load_backbone", "model loading")  # the name the runner calls
    phases.wrap(mteb.abstasks.AbsTask, "load_data", "dataset loading")
    phases.wrap(EmbeddingStore, "_compute", "encode: all but the forward passes")
    phases.wrap(EmbeddingStore, "_compute_spans", "encode: all but the forward passes")
    phases.wrap(iso_bench.fitting.Fits, "_fit_matrix", "fit: reading raw vectors")
    phases.wrap(iso_bench.fitting, "find_fit", "fit cache")
    phases.wrap(iso_bench.fitting, "save_fit", "fit cache")
    for name in METHODS:
        cls = METHODS.get(name)
        if "fit" in vars(cls):
            phases.wrap(cls, "fit", f"fit {name}")
        if "transform" in vars(cls):
            phases.wrap(cls, "transform", "transforms")
    phases.wrap(iso_bench.results.instances, "interval_record", "bootstrap intervals")
    phases.wrap(iso_bench.results.instances, "write_instances", "result writing")  # before run() installs the hook
    phases.wrap(iso_bench.mteb_plugin, "write_result", "result writing")


def tiny_model(folder: Path, dim: int = 64) -> str:
    """A 1-layer, ``dim``-d BERT with all-MiniLM-L6-v2's tokenizer (seeded random weights), saved as a
    sentence-transformers folder (Transformer, mean Pooling, Normalize) in ``folder``."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=dim, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=2 * dim, max_position_embeddings=512))
    hf = folder / "hf"
    bert.save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    transformer = models.Transformer(str(hf), max_seq_length=256)
    st = SentenceTransformer(modules=[transformer, models.Pooling(dim, pooling_mode="mean"), models.Normalize()],
                             device="cpu")
    st.save(str(folder / "tiny-bert"))
    return str(folder / "tiny-bert")


def distinct_texts(tasks: list[str], data_dir: str | None) -> list[str]:
    """Every text the tasks encode, each once, in first-seen order."""
    from iso_bench.data.fit_corpus import task_texts
    from iso_bench.data.sources import get_task
    from iso_bench.grid.tasks import resolve

    return list(dict.fromkeys(t for ref in resolve(tasks) for t in task_texts(get_task(ref.name, data_dir))))


def encode_floor(model: str, texts: list[str], batch_size: int, device: str, repeats: int, root: Path
                 ) -> dict[str, list[float]]:
    """Seconds per repeat: plain ``SentenceTransformer.encode`` of ``texts``, and iso-bench's encode of them into
    an empty raw-vector store, sentence vectors alone and with token vectors kept (alternated)."""
    from sentence_transformers import SentenceTransformer

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.index import text_key
    from iso_bench.vectors.store import EmbeddingStore

    plain = SentenceTransformer(model, device=device)
    backbone = load_backbone(model, device=device, batch_size=batch_size)
    items = [(text_key(t, None, None), t, None) for t in texts]
    seconds: dict[str, list[float]] = defaultdict(list)  # wall seconds; "cpu <name>": this process's CPU seconds

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    folders = itertools.count()

    def run(name: str, n: int = len(texts)) -> None:
        sync()
        start, cpu = time.perf_counter(), time.process_time()
        if name == "plain":
            plain.encode(texts[:n], batch_size=batch_size, show_progress_bar=False)
        else:
            kinds = {"tokens": ("sentence", "tokens"), "pooled": ("sentence", "tokens", "pool")}.get(name,
                                                                                                  ("sentence",))
            folder = root / f"floor-{next(folders)}"
            store = EmbeddingStore(backbone, folder, kinds=kinds, batch_size=batch_size, progress=False)
            store._compute("sentence", items[:n], "encoding", {}, collect=False)
            seconds[f"bytes {name}"] = [sum(p.stat().st_size for p in folder.rglob("*.npz"))]
        sync()
        seconds[name].append(time.perf_counter() - start)
        seconds[f"cpu {name}"].append(time.process_time() - cpu)

    names = ("plain", "sentence", "tokens", "pooled")
    for name in names:  # a warm-up of every path (kernels, allocator), not counted
        run(name, 2048)
    seconds.clear()
    for i in range(repeats):
        order = list(names)
        for name in order if i % 2 == 0 else order[::-1]:
            run(name)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--tasks", nargs="+", default=["mteb-sts"])
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads, fixed for every run (default: 2)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="pairs of cold runs, alternated raw, all, all, raw, ... (default: 1)")
    parser.add_argument("--tiny-model", action="store_true",
                        help="a 1-layer, 64-d BERT with all-MiniLM-L6-v2's tokenizer instead of --model")
    parser.add_argument("--tiny-dim", type=int, default=64,
                        help="the tiny model's width (default: 64; 384, all-MiniLM-L6-v2's, gives the methods "
                             "the work they do for it, e.g. whiten-256 runs)")
    parser.add_argument("--encode-only", action="store_true", help="the encode lines alone, no runs")
    args = parser.parse_args()
    if args.tiny_dim != 64 and not args.tiny_model:
        parser.error("--tiny-dim: sets the width of --tiny-model's model; add --tiny-model")
    if args.repeats < 1:
        parser.error(f"--repeats: need at least 1 pair of cold runs, got {args.repeats}")
    methods = list(dict.fromkeys(["raw", *args.methods]))

    torch.set_num_threads(args.threads)
    if args.threads == 1:  # one thread for the Rust tokenizer too: its pool waits on a busy second core
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    phases = Phases()
    instrument(phases)
    rows: list[tuple[str, float, RunSummary, dict[str, float]]] = []
    cpu_of: list[float] = []  # each run's CPU seconds (this process, every thread), in the order of rows
    with tempfile.TemporaryDirectory(prefix="iso-bench-bench-") as tmp:
        root = Path(tmp)
        if args.tiny_model:
            args.model = tiny_model(root, args.tiny_dim)
        texts = distinct_texts(args.tasks, args.data_dir)
        floor = encode_floor(args.model, texts, args.batch_size, args.device, args.repeats, root)
        plain = sum(floor["plain"])
        print(f"{len(texts):,} distinct texts, batch size {args.batch_size}, device {args.device}: plain encode "
              + ", ".join(f"{s:.2f}" for s in floor["plain"]) + " s; iso-bench, sentence vectors "
              + ", ".join(f"{s:.2f}" for s in floor["sentence"]) + " s; with token vectors "
              + ", ".join(f"{s:.2f}" for s in floor["tokens"]) + " s; with token vectors and pooled rows "
              + ", ".join(f"{s:.2f}" for s in floor["pooled"]) + " s", flush=True)
        print("raw-vector cache written: " + ", ".join(f"{name} {floor[f'bytes {name}'][0] / 1e6:.1f} MB" for name in
                                                         ("sentence", "tokens", "pooled")))
        print(f"encode vs sentence-transformers: {sum(floor['sentence']) / plain:.2f}")
        print(f"encode vs sentence-transformers, with token vectors: {sum(floor['tokens']) / plain:.2f}")
        print(f"encode vs sentence-transformers, with token vectors and pooled rows (a run with token-level variants): "
              f"{sum(floor['pooled']) / plain:.2f}")
        cpu = sum(floor["cpu plain"])  # this process's CPU time: less moved by other jobs on the machine
        print(f"encode vs sentence-transformers, CPU time: {sum(floor['cpu sentence']) / cpu:.2f}; with token "
              f"vectors: {sum(floor['cpu tokens']) / cpu:.2f}; and pooled rows: {sum(floor['cpu pooled']) / cpu:.2f}",
              flush=True)
        if args.encode_only:
            return

        if args.tiny_model:  # a method that needs more dimensions than the tiny model has is left out, and said
            from iso_bench.checks import check_methods
            from iso_bench.methods.base import MethodError

            kept = []
            for spec in methods:
                try:
                    check_methods([spec], {"sentence": args.tiny_dim, "token": args.tiny_dim}, args.model)
                    kept.append(spec)
                except MethodError as exc:
                    print(f"left out: {exc}")
            methods = kept

        def config(name: str, specs: list[str]) -> RunConfig:
            return RunConfig(model=args.model, methods=specs, tasks=args.tasks, data_dir=args.data_dir,
                             results_dir=root / f"results-{name}", cache_dir=root / f"cache-{name}",
                             batch_size=args.batch_size, threads=args.threads, device=args.device, progress=False)

        def timed(label: str, cfg: RunConfig) -> None:
            phases.take()
            start, cpu = time.perf_counter(), time.process_time()
            summary = run(cfg)
            rows.append((label, time.perf_counter() - start, summary, phases.take()))
            cpu_of.append(time.process_time() - cpu)
            print(f"  done: {label}, {rows[-1][1]:.1f} s", flush=True)

        print(f"model {args.model}; tasks {' '.join(args.tasks)}; methods {' '.join(methods)}; device {args.device}; "
              f"torch threads {args.threads}; imports {IMPORT_SECONDS:.1f} s (once, before run 1)", flush=True)
        import iso_bench.grid.runner

        for i in range(args.repeats):
            pair = [("raw alone, cold", f"raw{i}", ["raw"]), ("raw + every method, cold", f"all{i}", methods)]
            for label, name, specs in pair if i % 2 == 0 else pair[::-1]:
                getattr(iso_bench.grid.runner, "_LOADED", {}).clear()  # every cold run loads the model
                timed(label, config(name, specs))
        last = f"all{args.repeats - 1}"
        timed("warm, results kept", config(last, methods))
        shutil.rmtree(root / f"results-{last}")
        timed("warm, results deleted", config(last, methods))

    print(f"\n{'run':<28}{'seconds':>9}{'texts encoded':>15}{'fits run':>10}{'fits loaded':>13}")
    for label, seconds, summary, _ in rows:
        print(f"{label:<28}{seconds:>9.1f}{summary.encode_stats.get('computed', 0):>15}"
              f"{sum(getattr(summary, 'fits_run', {}).values()):>10}"
              f"{sum(getattr(summary, 'fits_loaded', {}).values()):>13}")

    names = [p for p in PHASES if p != "fits"]
    fit_names = sorted({k for *_, ph in rows for k in ph if k.startswith("fit ") and k != "fit cache"})
    print(f"\nseconds by phase (exclusive){'':<8}" + "".join(f"{i:>10}" for i in range(1, len(rows) + 1)))
    for name in [*names[:6], *fit_names, *names[6:]]:
        print(f"  {name:<34}" + "".join(f"{ph.get(name, 0.0):>10.2f}" for *_, ph in rows))
    print(f"  {'mteb evaluation and the rest':<34}" + "".join(f"{s - sum(ph.values()):>10.2f}" for _, s, _, ph in rows))
    print(f"  {'total':<34}" + "".join(f"{s:>10.2f}" for _, s, _, _ in rows))
    fits = getattr(rows[-1][2], "fits_run", None)
    print(f"\nfits run in the warm run with results deleted: {'?' if fits is None else sum(fits.values())}")
    raw = [s for label, s, *_ in rows if label == "raw alone, cold"]
    every = [s for label, s, *_ in rows if label == "raw + every method, cold"]
    if args.repeats > 1:
        print("cold ratio of each pair: " + ", ".join(f"{b / a:.2f}" for a, b in zip(raw, every, strict=True)))
    last_cold = next(s for label, s, *_ in reversed(rows) if label == "raw + every method, cold")

    def outside(label: str) -> tuple[float, float]:
        """Summed over the runs of ``label``: (seconds outside the forward passes, model and dataset loading
        and imports aside; forward-pass seconds)."""
        runs = [(s, ph) for lab, s, _, ph in rows if lab == label]
        fixed = ("forward passes", "model loading", "dataset loading")
        return (sum(s - sum(ph.get(k, 0.0) for k in fixed) for s, ph in runs),
                sum(ph.get(fixed[0], 0.0) for _, ph in runs))

    (raw_out, _), (all_out, all_forward) = outside("raw alone, cold"), outside("raw + every method, cold")
    print(f"\nseconds outside the forward passes (cold, model and dataset loading aside): raw {raw_out:.1f}, "
          f"raw + every method {all_out:.1f}; forward passes of raw + every method {all_forward:.1f}")
    print(f"ratio cold: {sum(every) / sum(raw):.2f}")
    print(f"ratio warm: {rows[-1][1] / last_cold:.2f}")
    print(f"overhead: {(all_out - raw_out) / all_forward:.2f}" if all_forward else "overhead: n/a (no forward pass)")
    print(f"encode vs sentence-transformers: {sum(floor['sentence']) / plain:.2f}")
    print(f"variants vs sentence-transformers: {sum(every) / len(every) / (plain / len(floor['plain'])):.2f}")
    every_cpu = [c for (label, *_), c in zip(rows, cpu_of, strict=True) if label == "raw + every method, cold"]
    print(f"variants vs sentence-transformers, CPU time: "
          f"{sum(every_cpu) / len(every_cpu) / (sum(floor['cpu plain']) / len(floor['cpu plain'])):.2f} "
          f"(cold runs {', '.join(f'{c:.1f}' for c in every_cpu)} CPU s; plain encode "
          f"{', '.join(f'{c:.1f}' for c in floor['cpu plain'])} CPU s; every thread of this process counted)")


if __name__ == "__main__":
    main()
