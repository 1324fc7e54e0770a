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


@pytest.mark.parametrize(("spec", "same_bits"), [("mean-proj-level=token", True), ("cluster-pca-2-1", False)])
def test_a_token_level_transform_holds_a_block_of_rows_and_gives_the_same_bits(spec, same_bits, tiny_backbone,
                                                                             tmp_path, monkeypatch) -> None:
    """A token-level variant whose method is not affine (an affine one runs after the pooling) transforms and pools
    at most ``TRANSFORM_VALUES`` values of the rows its pooling reads at a time (whole texts), and its vectors are
    bit for bit those of one product of all rows: SciFact's corpus through all-mpnet-base-v2 is 1.3 million 768-d
    token vectors per batch of texts, whose float64 copies at once outgrew 23 GB. cluster-pca gathers a block's
    rows by cluster, whose products see other neighbours: the same up to rounding."""
    import iso_bench.backbones.pool_replay as replay_module
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.numerics.linalg import row_blocks
    from iso_bench.vectors.store import EmbeddingStore

    words = "the cat sat on a mat while dogs play guitar and a man slices cucumbers near girls playing piano".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) + f" {i}" for i in range(60)]
    corpus = tmp_path / "fit.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    store = EmbeddingStore(tiny_backbone, tmp_path / "cache", kinds=("sentence", "tokens", "pool"), progress=False)
    variant = VariantEncoder(store, spec, corpus=CorpusProvider(str(corpus)))
    whole = variant.vectors(texts, None)  # every text's rows in one product (the default limit is far above)
    lengths = [len(r) for r in store.pool_rows(texts)]  # the rows its pooling reads: [CLS], the text's, [SEP]
    seen, original = [], type(tiny_backbone).pool

    def spy(self, rows, **kwargs):  # the transformed rows of a block, handed to the model's pooling
        seen.append(sum(len(r) for r in rows))
        return original(self, rows, **kwargs)

    monkeypatch.setattr(type(tiny_backbone), "pool", spy)
    limit = 2 * max(lengths) + 1
    monkeypatch.setattr(replay_module, "TRANSFORM_VALUES", limit * store.backbone.dim)
    blocked = variant.vectors(texts, None)
    assert len(seen) == len(row_blocks(lengths, limit)) > 3 and max(seen) <= limit and sum(seen) == sum(lengths)
    if same_bits:
        assert blocked.tobytes() == whole.tobytes()
    else:
        np.testing.assert_allclose(blocked, whole, rtol=1e-6, atol=1e-7)


def test_row_blocks_keep_texts_whole_under_the_limit_and_never_leave_one_row_alone() -> None:
    from iso_bench.numerics.linalg import row_blocks

    assert row_blocks([2, 2, 2, 2, 2], 4) == [(0, 2), (2, 4), (4, 5)]
    assert row_blocks([9, 1, 1], 4) == [(0, 1), (1, 3)]  # a text over the limit is a block of its own
    assert row_blocks([3, 3, 1], 4) == [(0, 1), (1, 3)]
    assert row_blocks([4, 1], 4) == [(0, 2)]  # one row at the end joins the block before it
    assert row_blocks([], 4) == [] and row_blocks([1], 4) == [(0, 1)]
