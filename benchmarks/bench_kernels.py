"""What does pinning the kernels to AVX2 cost? Each library reads its kernel setting when it first runs, so each
mode runs in a process of its own: the encode of all-MiniLM-L6-v2 (STS12's texts, from the data directory's hub
mirror, through iso-bench's backbone: equal-length batches of 32, one thread) and the fit of whiten on the vectors
it made (numpy's OpenBLAS), under ``ISO_BENCH_KERNELS=avx2`` and ``=native``, alternated ``--rounds`` times;
prints the best time of each, the ratio pinned/native, and whether the two modes gave the same bits.

    python benchmarks/bench_kernels.py --data-dir ../shared/data --texts 2000 --rounds 2

Prints timings and ratios; nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import hashlib, json, sys, time
import iso_bench
import numpy as np
from iso_bench.checks import set_threads
from iso_bench.kernels import describe_kernels
from iso_bench.methods import make_method
from iso_bench.backbones.hf_backbone import Backbone

set_threads(1)
data_dir, n = sys.argv[1], int(sys.argv[2])
rows = [json.loads(line) for line in open(f"{data_dir}/hub/mteb/sts12-sts/test.jsonl", encoding="utf-8")]
texts = [row[column] for row in rows for column in ("sentence1", "sentence2")]
texts = list(dict.fromkeys(texts))[:n]
backbone = Backbone("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a", device="cpu")
backbone.encode(texts[:64], kinds=("sentence",), batch_size=32, progress=False)  # warm up
start = time.perf_counter()
X = np.stack(backbone.encode(texts, kinds=("sentence",), batch_size=32, progress=False)["sentence"])
encode = time.perf_counter() - start
start = time.perf_counter()
method = make_method("whiten")[0].fit(X)
Y = method.transform(X)
fit = time.perf_counter() - start
digest = {"vectors": hashlib.sha256(X.tobytes()).hexdigest(), "whiten": hashlib.sha256(Y.tobytes()).hexdigest()}
print(json.dumps({"encode": encode, "fit": fit, "texts": len(texts), "class": describe_kernels()["class"], **digest}))
"""


def one(mode: str, data_dir: str, texts: int) -> dict:
    env = {**os.environ, "ISO_BENCH_KERNELS": mode}
    out = subprocess.run([sys.executable, "-c", CHILD, data_dir, str(texts)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR", "../shared/data"))
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"avx2": [], "native": []}
    for _ in range(args.rounds):
        for mode in runs:
            runs[mode].append(one(mode, args.data_dir, args.texts))
    best = {mode: {k: min(r[k] for r in rs) for k in ("encode", "fit")} for mode, rs in runs.items()}
    for mode, rs in runs.items():
        print(f"{mode:6s} class {rs[0]['class']}: encode {best[mode]['encode']:.2f} s, whiten fit+transform "
              f"{best[mode]['fit'] * 1000:.1f} ms ({rs[0]['texts']} texts; best of {args.rounds})")
    print(f"pinned/native: encode {best['avx2']['encode'] / best['native']['encode']:.3f}, "
          f"fit {best['avx2']['fit'] / best['native']['fit']:.3f}")
    same = {k: runs["avx2"][0][k] == runs["native"][0][k] for k in ("vectors", "whiten")}
    print(f"same bits in both modes: raw vectors {same['vectors']}, whitened {same['whiten']}")


if __name__ == "__main__":
    main()
