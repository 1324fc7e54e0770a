"""Why cluster-pca costs a contrastive encoder its Banking77 accuracy: how much of a model's token vectors is the
text they belong to rather than the word they are.

For the distinct test texts of Banking77Classification (the texts cluster-pca is fitted on in the "fitted on test
texts" setting), with the token vectors iso-bench fits cluster-pca on (its raw-vector store: the model's last
layer, special tokens left out), this prints per model:

- between: the share of the token vectors' total variance (sum of squared distances to their mean) that lies
  between texts, sum over texts of n_t ||mean_t - mean||^2 over sum ||x - mean||^2 (1: every text's tokens are
  one point; 0: every text holds the same mixture of tokens);
- dominant: the share of a text's tokens that fall in its most frequent cluster of cluster-pca's own k-means (its
  defaults: 27 clusters, scipy's kmeans2 with minit='points', seed 0, :class:`iso_bench.methods.cluster_pca.
  ClusterPCA`), averaged over the texts;
- NMI of the tokens' clusters with their text's intent label (77 intents), and with their token id
  (scikit-learn's normalized_mutual_info_score, arithmetic mean).

Usage, from the repository root, with the datasets in a data directory (see the top-level README) and the models
in the Hugging Face cache::

    python leaderboards/token_statistics.py --data-dir DATA
    python leaderboards/token_statistics.py --data-dir DATA --models sentence-transformers/all-MiniLM-L6-v2 \
        --texts 1000

``--texts N`` uses the first N distinct test texts (a subset: say so where the numbers are quoted).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

MODELS = ("sentence-transformers/all-mpnet-base-v2", "sentence-transformers/all-MiniLM-L6-v2")


def banking77(data_dir: Path, n: int | None) -> tuple[list[str], np.ndarray]:
    """The distinct test texts of Banking77 in first-seen order (as the fit corpus of the task setting dedups
    them) and each one's intent label; the first ``n`` where given."""
    import pandas as pd

    path = data_dir / "hub" / "mteb" / "banking77" / "data" / "test.parquet"
    if not path.is_file():
        sys.exit(f"token_statistics: error: {path} not found; give the data directory with --data-dir")
    table = pd.read_parquet(path, columns=["text", "label"]).drop_duplicates("text")
    table = table.head(n) if n else table
    return table["text"].tolist(), table["label"].to_numpy()


def statistics(tokens: list[np.ndarray], ids: list[np.ndarray], intents: np.ndarray, seed: int = 0
               ) -> dict[str, float]:
    """The four statistics (module docstring) of per-text token matrices ``tokens`` with their token ``ids``."""
    from sklearn.metrics import normalized_mutual_info_score

    from iso_bench.methods.cluster_pca import ClusterPCA

    lengths = np.array([len(t) for t in tokens])
    X = np.vstack(tokens).astype(np.float64)
    owner = np.repeat(np.arange(len(tokens)), lengths)
    centre = X.mean(axis=0)
    total = float(((X - centre) ** 2).sum())
    means = np.add.reduceat(X, np.r_[0, np.cumsum(lengths)[:-1]]) / lengths[:, None]
    between = float((lengths * ((means - centre) ** 2).sum(axis=1)).sum()) / total
    method = ClusterPCA(seed=seed).fit(np.vstack(tokens).astype(np.float32))
    clusters = method.predict(np.vstack(tokens).astype(np.float32))
    dominant = np.mean([np.bincount(clusters[owner == t]).max() / lengths[t] for t in range(len(tokens))])
    return {"texts": len(tokens), "tokens": len(X), "between": between, "dominant": float(dominant),
            "nmi_intent": float(normalized_mutual_info_score(clusters, intents[owner])),
            "nmi_token": float(normalized_mutual_info_score(clusters, np.concatenate(ids)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ISO_BENCH_DATA_DIR", "data")))
    parser.add_argument("--texts", type=int, default=None, help="the first N distinct test texts only")
    parser.add_argument("--threads", type=int, default=None, help="torch's CPU threads")
    args = parser.parse_args(argv)
    texts, intents = banking77(args.data_dir, args.texts)
    import torch

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"Banking77Classification, test split: {len(texts)} distinct texts")
    for model in args.models:
        store = EmbeddingStore(load_backbone(model), None, kinds=("sentence", "tokens"), progress=False)
        found = statistics(store.tokens(texts), store.token_ids(texts), intents)
        print(f"{model}: {found['tokens']} token vectors; between texts {found['between']:.1%} of the variance; "
              f"{found['dominant']:.1%} of a text's tokens in its most frequent cluster; NMI(cluster, intent) "
              f"{found['nmi_intent']:.2f}, NMI(cluster, token id) {found['nmi_token']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
