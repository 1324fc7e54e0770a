"""The store's memory follows the request, not the cache: a warm run of cluster-pca (token level) on STS16
peaks at the same memory whether the cache holds only STS16's vectors or 600 MB of other token vectors beside
them (another task's, another suite's: the same namespace, indexed as a run indexes them).

Each run is ``python -m iso_bench run`` in a subprocess (all-MiniLM-L6-v2, the STS16 mirror), whose peak RSS
it reports itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import HUB_MIRROR, MINILM

pytestmark = pytest.mark.slow
FILLER_BYTES = 600 << 20
RUN = """
import resource, sys
from iso_bench.cli import main
code = main(sys.argv[1:])
print("PEAK_RSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(code)
"""


def _run(cache: Path, results: Path, data: Path) -> tuple[int, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ISO_BENCH_THREADS": "1", "ISO_BENCH_NO_FIT_CACHE": "1"}
    argv = [sys.executable, "-c", RUN, "run", "--model", MINILM, "--methods", "cluster-pca", "--tasks", "STS16",
            "--data-dir", str(data), "--results", str(results), "--cache-dir", str(cache), "--no-progress",
            "--resamples", "10"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split("PEAK_RSS_KB")[-1].split()[0]), done.stdout + done.stderr


def _fill(cache: Path, n_bytes: int) -> int:
    """Token vectors of texts no run asks for, written and indexed in the run's namespace; their bytes."""
    from iso_bench.vectors.index import ShardIndex
    from iso_bench.vectors.shards import write_shard

    (folder,) = {p.parent for p in cache.rglob("index.sqlite")}
    index, rng, written, n = ShardIndex(folder), np.random.default_rng(0), 0, 0
    while written < n_bytes:
        blocks = [rng.standard_normal((40, 384), dtype=np.float32) for _ in range(1000)]
        keys = [int(n + i).to_bytes(32, "big") for i in range(len(blocks))]
        name = f"tokens-filler{n:08d}.npz"
        index.add("tokens", name, write_shard(folder / name, keys, blocks))
        written, n = written + sum(b.nbytes for b in blocks), n + len(blocks)
    return written


def test_a_warm_runs_memory_does_not_grow_with_the_rest_of_the_cache(tmp_path: Path) -> None:
    data = HUB_MIRROR
    if not (data / "mteb" / "sts16-sts").is_dir():
        pytest.skip("the STS16 mirror is not available")
    small = tmp_path / "small"
    _run(small, tmp_path / "cold", data)  # STS16's sentence and token vectors
    big = tmp_path / "big"
    shutil.copytree(small, big)
    filler = _fill(big, FILLER_BYTES)
    alone, said = _run(small, tmp_path / "warm-small", data)
    beside, err = _run(big, tmp_path / "warm-big", data)
    grown_gb = (beside - alone) / (1 << 20)
    print(json.dumps({"peak_rss_mb": {"small cache": alone >> 10, "with filler": beside >> 10},
                      "filler_mb": filler >> 20}))
    assert filler >= FILLER_BYTES and grown_gb < 0.3, (alone, beside, err[-2000:])
    for out in (said, err):  # nothing encoded again: the warm runs read their vectors
        assert "raw vectors: 0 texts encoded" in out, out[-2000:]
