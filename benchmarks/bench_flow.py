"""How much cheaper is fitting ``flow`` (BERT-flow's Glow) now than at an earlier revision, and does it
learn the same map?

The earlier ``iso_bench/methods/flow.py`` and ``glow.py`` are read with ``git show REV:...`` into a
temporary folder and imported from there (not registered), so both implementations run in this process,
on the same vectors, with the same seed, alternately (``--repeats`` times; the fastest fit of each counts),
at a fixed number of torch threads set at the start (the new code trains on one thread whatever that
number; the old one used it). Data sets: 6,000 x 384 and 6,000 x 768 anisotropic float32 vectors
(synthetic), the arrays of ``--npz FILE``, and with ``--cache DIR`` about ``--n`` sentence vectors
stacked from an iso_bench raw-vector cache (its ``sentence-*.npz`` shards).

    python benchmarks/bench_flow.py [--threads 1] [--repeats 3] [--old-rev b9d554f] [--npz FILE]
        [--cache /tmp/prof/cache] [--device cuda]

Prints per data set: the wall and CPU milliseconds of one training step alone (on the CPU), old and new
on the same batch, and their ratios; the fit's seconds and milliseconds per training step (the whole fit
divided by its steps: data-dependent initialisation included), in wall time and in this process's CPU
time (steadier on a busy machine), for old and new, and the ratios new / old; then the largest absolute
difference between the two transforms of the fit vectors, beside the same difference for the old code
fitted on the vectors moved by about one float32 rounding (what rounding alone moves), both final
training losses, and the Spearman correlation of the cosine similarities of 20,000 random pairs before
and after each transform. Nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
from scipy.stats import spearmanr

OLD_REV = "b9d554f"
"""The last revision with the autograd-trained Glow (one Adam over 99 tensors, threads as the caller set)."""
ROOT = Path(__file__).resolve().parent.parent


def old_flow(rev: str, folder: Path) -> ModuleType:
    """``flow.py`` of revision ``rev`` as a module ``old_flow`` importing its own ``glow.py`` (``old_glow``),
    its ``Flow`` not registered."""
    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout

    glow_src = show("iso_bench/methods/glow.py")
    flow_src = show("iso_bench/methods/flow.py")
    flow_src = flow_src.replace("from iso_bench.methods import glow\n", "import old_glow as glow\n")
    flow_src = flow_src.replace("\n@register\n", "\n")
    (folder / "old_glow.py").write_text(glow_src)
    (folder / "old_flow.py").write_text(flow_src)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("old_flow", folder / "old_flow.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Anisotropic vectors: a common offset, decaying spectrum, one skewed coordinate."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d)) * np.exp(-np.arange(d) / (d / 10))[:, None]
    X = rng.normal(size=(n, d)) @ mixing + 3.0 * rng.normal(size=d)
    X[:, 0] = X[:, 0] ** 2
    return X.astype(np.float32)


def from_cache(folder: Path, n: int) -> np.ndarray:
    from iso_bench.vectors.store import read_shard

    vectors: list[np.ndarray] = []
    for path in sorted(folder.glob("*/*/*/sentence-*.npz")):
        vectors += [v for v in read_shard(path).values() if v.ndim == 1]
        if len(vectors) >= n:
            break
    return np.stack(vectors[:n]).astype(np.float32)


def step_costs(old: ModuleType, X: np.ndarray, threads: int, rounds: int, steps: int = 20) -> dict[str, tuple]:
    """(wall, CPU) milliseconds of one training step alone (loss and gradient, clipping, Adam) on a fixed
    batch of 64 of ``X`` (standardised), old and new alternately, ``rounds`` rounds of ``steps`` steps
    each after a warm-up; the fastest round counts. Old on ``threads`` threads, new on one, as they fit."""
    import torch

    from iso_bench.methods import glow
    from iso_bench.methods.glow_trainer import Trainer

    d = X.shape[1]
    x = torch.as_tensor((X - X.mean(axis=0)) / (X.std(axis=0) + 1e-12), dtype=torch.float32)
    torch.manual_seed(0)
    arch = old._ARCH["glow"]
    params = arch.init(torch, d, old.Flow())
    arch.data_init(torch, params, x[:4096])
    trained = arch.trainables(params)
    opt_old = torch.optim.Adam(trained, lr=1e-6, fused=True)
    levels = glow.init(torch, d, 3, 3, 32, "reverse")
    glow.data_init(torch, levels, x[:4096])
    new = Trainer(torch, levels)
    new.theta.grad = new.grad
    opt_new = torch.optim.Adam([new.theta], lr=1e-6, fused=True)
    batch = x[:64]

    def old_step() -> None:
        z, logdet = arch.train_forward(torch, params, batch)
        loss = -(old._log_normal(z) + logdet).mean() / d
        opt_old.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, max_norm=10.0)
        opt_old.step()

    def new_step() -> None:
        new.loss_and_grad(batch)
        g = new.theta.grad
        g.mul_((10.0 / (torch.linalg.vector_norm(g) + 1e-6)).clamp_(max=1.0))
        opt_new.step()

    best = {"old": (np.inf, np.inf), "new": (np.inf, np.inf)}
    for round_ in range(rounds + 1):
        for which, step, n_threads in (("old", old_step, threads), ("new", new_step, 1)):
            torch.set_num_threads(n_threads)
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            spent = ((time.perf_counter() - start) / steps * 1e3, (time.process_time() - start_cpu) / steps * 1e3)
            if round_:  # the first round warms up
                best[which] = (min(best[which][0], spent[0]), min(best[which][1], spent[1]))
    torch.set_num_threads(threads)
    return best


def cosine_spearman(X: np.ndarray, Z: np.ndarray, pairs: np.ndarray) -> float:
    def cos(A: np.ndarray) -> np.ndarray:
        a, b = A[pairs[:, 0]], A[pairs[:, 1]]
        return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-300)

    return float(spearmanr(cos(X), cos(Z)).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads, set at the start")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-rev", default=OLD_REV)
    parser.add_argument("--npz", help="a .npz file: each 2-d array in it is a data set")
    parser.add_argument("--cache", help="an iso_bench raw-vector cache folder (e.g. /tmp/prof/cache)")
    parser.add_argument("--n", type=int, default=6000, help="vectors: synthetic, and stacked from --cache")
    parser.add_argument("--device", default="cpu", help="where the new code trains (Flow.device)")
    args = parser.parse_args()

    import torch

    from iso_bench.methods.flow import Flow

    torch.set_num_threads(args.threads)
    sets = {f"synthetic {args.n} x {d}": synthetic(args.n, d) for d in (384, 768)}
    if args.npz:
        with np.load(args.npz) as z:
            sets.update({f"{Path(args.npz).name}:{k}": z[k].astype(np.float32) for k in z.files if z[k].ndim == 2})
    if args.cache:
        X = from_cache(Path(args.cache), args.n)
        sets[f"cache {len(X)} x {X.shape[1]}"] = X

    with tempfile.TemporaryDirectory(prefix="bench-flow-") as tmp:
        old = old_flow(args.old_rev, Path(tmp))
        print(f"torch {torch.__version__}; {torch.get_num_threads()} thread(s) set at the start (the old code "
              f"trains on them, the new on one); old = {args.old_rev}; new trains on {args.device}; fastest of "
              f"{args.repeats} alternate fits each; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        timing, agreement, alone = [], [], []
        for name, X in sets.items():
            if args.device == "cpu":
                cost = step_costs(old, X, args.threads, args.repeats)
                alone.append(f"{name:<26}{cost['old'][0]:>9.2f}{cost['new'][0]:>9.2f}"
                             f"{cost['new'][0] / cost['old'][0]:>9.3f}{cost['old'][1]:>9.2f}{cost['new'][1]:>9.2f}"
                             f"{cost['new'][1] / cost['old'][1]:>9.3f}")
            wall: dict[str, list[float]] = {"old": [], "new": []}
            cpu: dict[str, list[float]] = {"old": [], "new": []}
            fitted = {}
            for _ in range(args.repeats):
                for which in ("old", "new"):
                    method = old.Flow() if which == "old" else Flow()
                    if which == "new":
                        method.device = args.device
                    start, start_cpu = time.perf_counter(), time.process_time()
                    method.fit(X)
                    wall[which].append(time.perf_counter() - start)
                    cpu[which].append(time.process_time() - start_cpu)
                    fitted[which] = method
                    assert torch.get_num_threads() == args.threads
            steps = fitted["new"].n_steps_
            w_old, w_new, c_old, c_new = min(wall["old"]), min(wall["new"]), min(cpu["old"]), min(cpu["new"])
            timing.append(f"{name:<26}{steps:>6}{w_old:>8.2f}{w_new:>8.2f}{1e3 * w_old / steps:>9.2f}"
                          f"{1e3 * w_new / steps:>9.2f}{w_new / w_old:>9.3f}{1e3 * c_old / steps:>9.2f}"
                          f"{1e3 * c_new / steps:>9.2f}{c_new / c_old:>9.3f}")
            # the yardstick of rounding: the old code itself on the vectors moved by about one float32 rounding
            z_other = old.Flow().fit((X.astype(np.float64) * (1 + 1e-7)).astype(np.float32)).transform(X)
            z_old, z_new = fitted["old"].transform(X), fitted["new"].transform(X)
            pairs = np.random.default_rng(1).integers(0, len(X), size=(20_000, 2))
            rho_old, rho_new = cosine_spearman(X, z_old, pairs), cosine_spearman(X, z_new, pairs)
            agreement.append(f"{name:<26}{np.abs(z_new - z_old).max():>11.2e}{np.abs(z_other - z_old).max():>13.2e}"
                             f"{fitted['old'].history_[-1]:>11.6f}{fitted['new'].history_[-1]:>11.6f}"
                             f"{rho_old:>10.6f}{rho_new:>10.6f}{abs(rho_new - rho_old):>10.1e}")
        if alone:
            print(f"\none training step alone (batch of 64: loss and gradient, clipping, Adam), ms\n"
                  f"{'':<26}{'wall':^27}{'CPU':^27}\n"
                  f"{'data':<26}{'old':>9}{'new':>9}{'new/old':>9}{'old':>9}{'new':>9}{'new/old':>9}")
            print("\n".join(alone))
        print(f"\nwhole fit\n{'':<32}{'seconds':^16}{'ms per step (wall)':^27}{'ms per step (CPU)':^27}")
        print(f"{'data':<26}{'steps':>6}{'old':>8}{'new':>8}{'old':>9}{'new':>9}{'new/old':>9}{'old':>9}{'new':>9}"
              f"{'new/old':>9}")
        print("\n".join(timing))
        print(f"\n{'data':<26}{'max|dz| new':>11}{'old rounded':>13}{'loss old':>11}{'loss new':>11}"
              f"{'rho old':>10}{'rho new':>10}{'|drho|':>10}")
        print("\n".join(agreement))
        print("\nmax|dz| new: largest |new - old| entry of the transformed fit vectors; old rounded: the same "
              "between the old code fitted on the vectors and on the vectors times 1 + 1e-7 (about one float32 "
              "rounding: what rounding alone moves); loss: the last step's; rho: Spearman of raw against "
              "transformed cosines of 20,000 random pairs")
        print(f"load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
