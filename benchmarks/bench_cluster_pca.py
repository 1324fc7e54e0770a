"""How much faster is ``cluster-pca`` than the implementation it replaced, and how far apart are their outputs?

Times, in one process and on a fixed number of BLAS threads, the previous implementation (scipy's ``kmeans2``
and ``vq`` on a float64 copy, float64 scatter matrices: ``old_fit``/``old_transform`` below, copied from git
before the change) against :class:`~iso_bench.methods.cluster_pca.ClusterPCA` on the same float32 matrix, then
compares them: the share of fit vectors whose cluster differs, the largest difference of the transformed
vectors, of the cluster means, and of the removed subspaces (the sine of the largest principal angle).

    python benchmarks/bench_cluster_pca.py                        # synthetic 75,000 x 384 float32 matrix
    python benchmarks/bench_cluster_pca.py --npz tokens.npz       # a float32 matrix saved by numpy (first array)
    python benchmarks/bench_cluster_pca.py --cache /tmp/prof/cache  # token vectors of an iso_bench raw-vector cache
    python benchmarks/bench_cluster_pca.py --versus head --dim 4096 --rows 60000 --repeat 1

``--versus head`` times fit against the code before the Gram matrix instead (git 56f26bb: ``head_directions``
below, a float64 SVD of a cluster with no more members than dimensions), the rest of the fit the same, and
prints the time the directions took apart: at 4,096-d most clusters of 60,000 vectors have fewer members.

The synthetic matrix mimics contextual token vectors: overlapping anisotropic Gaussian clusters with an
offset and a few large outlier dimensions (wider than 384-d, each cluster spreads in 384 random directions).
Prints the timings (the best of ``--repeat`` runs) and the ratios new/old; nothing is asserted (timings on
shared machines are noisy: the load average is printed too).
"""

from __future__ import annotations

import argparse
import os
import sys

THREADS = os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import glob  # noqa: E402
import inspect  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from iso_bench.methods.cluster_pca import ClusterPCA  # noqa: E402
from iso_bench.numerics.linalg import fix_signs  # noqa: E402


# ---- the previous implementation (git: iso_bench/methods/cluster_pca.py before the change) ---------
def old_fit(X: np.ndarray, n_clusters: int = 27, n_directions: int = 12, seed: int = 0) -> dict:
    """kmeans2 (9 iterations, then vq by its centroids: its 10th labels) and float64 scatter matrices."""
    from scipy.cluster.vq import kmeans2, vq
    from scipy.linalg import eigh

    X = np.asarray(X).astype(np.float64, copy=False)
    if not np.isfinite(X).all():  # the base class's check
        raise ValueError("NaN")
    key = "rng" if "rng" in inspect.signature(kmeans2).parameters else "seed"
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="One of the clusters is empty")
        centroids, _ = kmeans2(X, n_clusters, iter=9, minit="points", missing="warn",
                               **{key: np.random.default_rng(seed)})
    centroids = np.asarray(centroids, dtype=np.float64)
    labels = np.asarray(vq(X, centroids, check_finite=False)[0], dtype=np.intp)
    c, k, d = n_clusters, n_directions, X.shape[1]
    means, components, used = centroids.copy(), np.zeros((c, k, d)), np.zeros(c, dtype=int)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(c + 1))
    grouped = X[order]
    for j in range(c):
        members = grouped[bounds[j] : bounds[j + 1]]
        if len(members) == 0:
            continue
        means[j] = members.mean(axis=0)
        if k and len(members) > 1:
            centred, kk = members - means[j], min(k, len(members) - 1)
            if len(centred) > d:
                vals, vecs = eigh(centred.T @ centred, subset_by_index=[d - kk, d - 1])
                sv, vt = np.sqrt(np.clip(vals[::-1], 0.0, None)), vecs[:, ::-1].T
            else:
                _, sv, vt = np.linalg.svd(centred, full_matrices=False)
            comps = fix_signs(vt[:kk][sv[:kk] > 1e-12 * sv[0]])
            components[j, : len(comps)] = comps
            used[j] = len(comps)
    return {"centroids": centroids, "means": means, "components": components, "used": used, "labels": labels}


def old_transform(state: dict, X: np.ndarray) -> np.ndarray:
    from scipy.cluster.vq import vq

    X = np.asarray(X).astype(np.float64, copy=False)
    if not np.isfinite(X).all():
        raise ValueError("NaN")
    c = len(state["centroids"])
    labels = np.asarray(vq(X, state["centroids"], check_finite=False)[0], dtype=np.intp)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(c + 1))
    grouped = X[order]
    for j in range(c):
        Y = grouped[bounds[j] : bounds[j + 1]]
        if len(Y):
            Y -= state["means"][j]
            C = state["components"][j]
            Y -= (Y @ C.T) @ C
    out = np.empty_like(grouped)
    out[order] = grouped
    return out


def head_directions(members: np.ndarray, k: int) -> np.ndarray:
    """``cluster_pca._directions`` before the Gram matrix (git 56f26bb)."""
    from scipy.linalg import eigh

    m, d = members.shape
    if m > d:
        vals, vecs = eigh(members.T @ members, subset_by_index=[d - k, d - 1], overwrite_a=True, check_finite=False)
        sv, vt = np.sqrt(np.clip(vals[::-1], 0.0, None)), vecs[:, ::-1].T.astype(np.float64)
    else:
        _, sv, vt = np.linalg.svd(members.astype(np.float64), full_matrices=False)
    return fix_signs(vt[:k][sv[:k] > 1e-12 * sv[0]])


def versus_head(X: np.ndarray, c: int, k: int, seed: int, repeat: int) -> None:
    """Fit with ``head_directions``, then with today's ``_directions``: times (fit, and the directions within
    it, of the fastest fit) and how far apart the fitted states and outputs are."""
    from iso_bench.methods import cluster_pca

    today, fitted, rows = cluster_pca._directions, {}, []
    for name, directions in (("old", head_directions), ("new", today)):
        spent: list[float] = []

        def timed(members: np.ndarray, kk: int, directions=directions, spent=spent) -> np.ndarray:
            start = time.perf_counter()
            out = directions(members, kk)
            spent.append(time.perf_counter() - start)
            return out

        cluster_pca._directions = timed
        try:
            runs = []
            for _ in range(repeat):
                spent.clear()
                start = time.perf_counter()
                fitted[name] = ClusterPCA(n_clusters=c, n_directions=k, seed=seed).fit(X)
                runs.append((time.perf_counter() - start, sum(spent)))
        finally:
            cluster_pca._directions = today
        rows.append(min(runs))
    print(f"load average after:  {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    old, new = fitted["old"], fitted["new"]
    print(f"\n{'':10} {'old s':>8} {'new s':>8} {'new/old':>8}")
    for i, what in enumerate(("fit", "directions")):
        print(f"{what:10} {rows[0][i]:8.3f} {rows[1][i]:8.3f} {rows[1][i] / rows[0][i]:8.3f}")
    sizes = new.cluster_sizes_
    print(f"\nclusters with no more members than dimensions: {int(((sizes > 0) & (sizes <= X.shape[1])).sum())} of {c} "
          f"(sizes {sizes.min()} to {sizes.max()})")
    same = [key for key in ("centroids_", "means_", "cluster_sizes_", "n_directions_")
            if np.array_equal(getattr(old, key), getattr(new, key))]
    print(f"equal to the last bit: {', '.join(same)}; components equal: "
          f"{np.array_equal(old.components_, new.components_)}")
    angles = []  # on orthonormal bases (float32 eigenvectors are orthonormal only to about 1e-7)
    for a, b, used in zip(old.components_, new.components_, new.n_directions_, strict=True):
        if used and not np.array_equal(a, b):
            qa, qb = np.linalg.qr(a[:used].T)[0], np.linalg.qr(b[:used].T)[0]
            angles.append(float(np.linalg.norm(qa - qb @ (qb.T @ qa), ord=2)))
    print(f"removed subspaces that differ: {len(angles)}, largest sine of a principal angle: "
          f"{max(angles, default=0.0):.3g}")
    print(f"largest |new - old| transformed entry: {np.abs(new.transform(X) - old.transform(X)).max():.3g} "
          f"(largest |entry| of X {np.abs(X).max():.3g})")


# ---- data ---------------------------------------------------------------------------------------
def synthetic(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Token-like float32 vectors: 40 overlapping anisotropic clusters of uneven sizes around a common
    offset, and three outlier dimensions with large values."""
    rng = np.random.default_rng(seed)
    k = 40
    sizes = rng.multinomial(n, rng.dirichlet(np.full(k, 0.7)))
    offset = rng.normal(size=d) * 0.3
    parts = []
    for size in sizes:
        r = min(d, 384)  # 384-d and narrower: the same draws as before
        spread = rng.normal(size=(d, r)) * np.exp(-np.arange(r) / 40.0)  # decaying spectrum, own directions
        parts.append(offset + rng.normal(size=d) * 0.5 + rng.normal(size=(size, r)) @ spread.T * 0.05)
    X = np.vstack(parts)
    X[:, [7, 123, 301]] += np.array([-6.0, 4.0, 3.0]) + rng.normal(size=(n, 3)) * 0.5
    return rng.permutation(X).astype(np.float32)


def from_cache(root: str, n: int) -> np.ndarray:
    """The first ``n`` token vectors a raw-vector cache holds, read through each namespace's index in (shard, row)
    order: in shards of their own, or as runs of the pooled rows' shards (where the store keeps them once)."""
    from iso_bench.vectors.index import ShardIndex, group_by_shard
    from iso_bench.vectors.shards import read_rows

    rows, total = [], 0
    for found in sorted(glob.glob(os.path.join(root, "*", "*", "*", "index.sqlite"))):
        index = ShardIndex(Path(found).parent)
        for kind in ("tokens", "pool"):
            index.sync(kind)
        found = {key: tuple(hit) for key, *hit in index.db.execute(
            "SELECT key, shard, start, stop, crc FROM entries WHERE kind = 'tokens' ORDER BY shard, start")}
        for name, _, starts, stops, crcs in group_by_shard(found, list(found)):
            offset, n_rows, dim, _, storage = index.shard(name)
            blocks = read_rows(index.folder / name, (offset, n_rows, dim, storage), starts, stops, crcs)
            rows += blocks
            total += sum(map(len, blocks))
            if total >= n:
                break
        index.close()
        if total >= n:
            break
    if not rows:
        sys.exit(f"no token vectors in the raw-vector caches under {root}/*/*/*/")
    return np.concatenate(rows)[:n].astype(np.float32)


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--npz", help="a .npz file whose first array is the (n, d) matrix")
    source.add_argument("--cache", help="an iso_bench raw-vector cache folder that holds token vectors")
    parser.add_argument("--rows", type=int, default=75_000)
    parser.add_argument("--dim", type=int, default=384, help="synthetic data only")
    parser.add_argument("--clusters", type=int, default=27)
    parser.add_argument("--directions", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--versus", choices=("kmeans2", "head"), default="kmeans2",
                        help="old: the kmeans2 implementation (default) or the directions before the Gram matrix")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the warning about a tiny cluster is not news here

    if args.npz:
        with np.load(args.npz) as z:
            X, what = np.asarray(z[z.files[0]])[: args.rows].astype(np.float32), args.npz
    elif args.cache:
        X, what = from_cache(args.cache, args.rows), f"token vectors from {args.cache}"
    else:
        X, what = synthetic(args.rows, args.dim, args.seed), "synthetic token-like vectors"
    from threadpoolctl import threadpool_info

    threads = sorted({(i["internal_api"], i["num_threads"]) for i in threadpool_info()})
    print(f"data: {X.shape[0]} x {X.shape[1]} {X.dtype}, {what}")
    print(f"threads: OMP_NUM_THREADS={THREADS}, BLAS/OpenMP pools {threads}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores")

    c, k, seed = args.clusters, args.directions, args.seed
    if args.versus == "head":
        return versus_head(X, c, k, seed, args.repeat)
    t_old_fit, state = best(lambda: old_fit(X, c, k, seed), args.repeat)
    t_old_tr, old_out = best(lambda: old_transform(state, X), args.repeat)
    method = ClusterPCA(n_clusters=c, n_directions=k, seed=seed)
    t_new_fit, _ = best(lambda: method.fit(X), args.repeat)
    t_new_tr, new_out = best(lambda: method.transform(X), args.repeat)
    print(f"load average after:  {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

    print(f"\n{'':10} {'old s':>8} {'new s':>8} {'new/old':>8}")
    for name, old, new in (("fit", t_old_fit, t_new_fit), ("transform", t_old_tr, t_new_tr)):
        print(f"{name:10} {old:8.3f} {new:8.3f} {new / old:8.3f}")

    labels = method.predict(X)
    angles = []
    for j in range(c):
        a = state["components"][j, : state["used"][j]]
        b = method.components_[j, : method.n_directions_[j]]
        if len(a) != len(b):
            angles.append(1.0)
        elif len(a):  # sine of the largest principal angle between the two removed subspaces
            angles.append(float(np.linalg.norm(a.T - b.T @ (b @ a.T), ord=2)))
    same_sizes = np.array_equal(np.bincount(labels, minlength=c), np.bincount(state["labels"], minlength=c))
    print(f"\nlabels that differ: {np.mean(labels != state['labels']):.6f} of {len(labels)} "
          f"(cluster sizes equal: {same_sizes})")
    print(f"largest |new - old| transformed entry: {np.abs(new_out - old_out).max():.3g} "
          f"(largest |old| entry {np.abs(old_out).max():.3g}, output dtype {new_out.dtype})")
    print(f"largest |new - old| mean entry: {np.abs(method.means_ - state['means']).max():.3g}")
    print(f"removed subspaces, largest sine of a principal angle: {max(angles, default=0.0):.3g}")


if __name__ == "__main__":
    main()
