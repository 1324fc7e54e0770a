"""``iso-bench outliers``: the neuron-level outlier analysis of every layer of a model
(:func:`iso_bench.numerics.outliers.analyse`), written as markdown, JSON and a figure; encoders and decoders.

Example:
    >>> main(["outliers", "--model", "google-bert/bert-base-uncased"])                 # doctest: +SKIP
"""

from __future__ import annotations

import argparse
from pathlib import Path

from iso_bench.backbones.loader import load_backbone
from iso_bench.backbones.precision import DTYPES
from iso_bench.checks import check_results_dir, set_threads
from iso_bench.cli.arguments import device_name, positive_int
from iso_bench.data.fit_corpus import read_text_file, task_texts
from iso_bench.data.sources import get_task
from iso_bench.mteb_plugin import DEFAULT_MODEL
from iso_bench.numerics.outliers import analyse
from iso_bench.report import write_outlier_reports

DTYPE_HELP = ("the precision the network runs in (auto: the checkpoint's, from its config.json; default: auto); "
              "recorded, and a key of the cache")


def add_outliers(sub: argparse._SubParsersAction) -> None:
    """The ``outliers`` sub-command's parser."""
    out = sub.add_parser("outliers", help="neuron-level outlier analysis of every layer (Luo et al. 2021)",
                         description="For each layer: the dimensions that most often hold a token vector's smallest "
                         "or largest value, how often, their mean in standard deviations, and how their value "
                         "varies with token position; and the dimensions of huge value at the first position only "
                         "(a decoder's: its first position and BOS are analysed too). Writes "
                         "<model>-outliers.{md,json,png}.")
    out.set_defaults(func=cmd_outliers, network=True)
    out.add_argument("--model", default=DEFAULT_MODEL, help=f"hub id or local folder (default: {DEFAULT_MODEL})")
    out.add_argument("--revision", help="model revision (default: the one mteb pins, else the latest)")
    out.add_argument("--layers", nargs="+", type=int, metavar="L",
                     help="hidden-state layers, 0 = embeddings, -1 = last (default: all)")
    out.add_argument("--corpus", default="STSBenchmark",
                     help="an mteb task whose test sentences form the corpus, or a text file (default: STSBenchmark)")
    out.add_argument("--output", default="outliers", help="folder for the reports (default: ./outliers)")
    out.add_argument("--top", type=positive_int, default=5, help="dimensions listed per layer (default: 5)")
    out.add_argument("--data-dir", help="data directory (env ISO_BENCH_DATA_DIR)")
    out.add_argument("--device", type=device_name, help="cpu, cuda, ... (default: cuda when available)")
    out.add_argument("--dtype", choices=DTYPES, help=DTYPE_HELP)
    out.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default: 32)")
    out.add_argument("--threads", type=positive_int, metavar="N",
                     help="CPU threads for torch (env ISO_BENCH_THREADS; default: the CPUs not already busy)")
    out.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code (off by default)")
    out.add_argument("--no-progress", action="store_true", help="hide progress bars (model loading's too)")


def outlier_corpus(corpus: str, data_dir: str | None = None) -> tuple[list[str], str]:
    """The texts of ``iso-bench outliers --corpus`` (a text file, one text per line, or an mteb task's test
    sentences) and how the report names them."""
    if Path(corpus).is_file():
        return read_text_file(corpus), f"file {Path(corpus).name}"
    return task_texts(get_task(corpus, data_dir)), f"{corpus} test sentences"


def cmd_outliers(args: argparse.Namespace) -> int:
    """Outlier dimensions of every layer of a model, as markdown, JSON and a figure."""
    check_results_dir(args.output, "--output")
    set_threads(args.threads)
    texts, corpus = outlier_corpus(args.corpus, args.data_dir)
    backbone = load_backbone(args.model, args.revision, device=args.device, hidden_states=True, dtype=args.dtype,
                             trust_remote_code=args.trust_remote_code)
    report = analyse(backbone, texts, args.layers, batch_size=args.batch_size, progress=not args.no_progress,
                     corpus=corpus)
    paths = write_outlier_reports(report, args.output, args.top)
    for layer in report.layers:
        first = f"; first position {', '.join(map(str, layer.first_outliers))}" if layer.first_outliers else ""
        print(f"layer {layer.layer:>2}: outliers {', '.join(map(str, layer.outliers)) or 'none'}{first}")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
