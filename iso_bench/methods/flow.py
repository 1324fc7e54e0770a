"""``flow``: BERT-flow (Li et al., EMNLP 2020), a Glow-style normalizing flow to a standard Gaussian.

The encoder stays frozen; an invertible map f is trained by maximum likelihood so that z = f(x) of
the fit vectors follows N(0, I), and ``transform`` returns z. Architecture (Glow, Kingma & Dhariwal
2018, on flat vectors): inputs are standardised per dimension, then ``n_blocks`` blocks of

* ActNorm: per-dimension affine map, initialised from data so its output has mean 0 and variance 1;
* invertible linear layer W = P L (U + diag(sign * exp(log_s))) (LU form, log|det W| = sum log_s),
  initialised from a random rotation;
* affine coupling: the first half of the coordinates feeds an MLP that outputs a log-scale (bounded
  by tanh to [-1, 1] per block, for stability) and a shift for the second half; its last layer
  starts at zero, so each coupling starts as the identity.

torch is imported inside :meth:`Flow.fit` only. The trained parameters are stored as float64 numpy
arrays (``blocks_``), and ``transform``/``inverse``/``log_likelihood`` run in numpy through the
same forward code that training ran in torch (:func:`_forward` is written once for both).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import Method, MethodError, register

_LOG_2PI = float(np.log(2.0 * np.pi))


def _coupling_params(b: dict[str, Any], xa: Any, xp: Any) -> tuple[Any, Any]:
    h = xa @ b["W1"] + b["b1"]
    h = h * (h > 0)  # ReLU, in both numpy and torch
    out = h @ b["W2"] + b["b2"]
    nb = out.shape[1] // 2
    return xp.tanh(out[:, :nb]), out[:, nb:]


class _Factored:
    """``x @ _Factored(src, L, U)`` == ``x @ P @ L @ U`` for the permutation matrix P with P[src[j], j] = 1."""

    def __init__(self, src: Any, L: Any, U: Any) -> None:
        self.src, self.L, self.U = src, L, U

    def __rmatmul__(self, x: Any) -> Any:
        return x[:, self.src] @ self.L @ self.U


def _forward(blocks: list[dict[str, Any]], x: Any, xp: Any) -> tuple[Any, Any]:
    """Map ``x`` (standardised) to ``z``; also return log|det dz/dx| per row. ``xp`` is numpy or torch."""
    logdet = 0.0
    for b in blocks:
        x = (x + b["bias"]) * xp.exp(b["log_scale"])
        x = x @ b["W"]
        da = b["W1"].shape[0]
        log_s, t = _coupling_params(b, x[:, :da], xp)
        x = xp.concatenate([x[:, :da], x[:, da:] * xp.exp(log_s) + t], axis=1)
        logdet = logdet + b["log_scale"].sum() + b["logdet_W"] + log_s.sum(axis=1)
    return x, logdet


def _inverse(blocks: list[dict[str, np.ndarray]], z: np.ndarray) -> np.ndarray:
    for b in reversed(blocks):
        da = b["W1"].shape[0]
        log_s, t = _coupling_params(b, z[:, :da], np)
        z = np.concatenate([z[:, :da], (z[:, da:] - t) * np.exp(-log_s)], axis=1)
        z = z @ b["W_inv"]
        z = z * np.exp(-b["log_scale"]) - b["bias"]
    return z


def _log_normal(z: Any) -> Any:
    return -0.5 * (z * z).sum(axis=1) - 0.5 * z.shape[1] * _LOG_2PI


@register
class Flow(Method):
    """A Glow-style normalizing flow trained to map the fit vectors to N(0, I); transform = latent z.

    Parameters:
        n_blocks: number of (ActNorm, linear, coupling) blocks.
        hidden: width of each coupling MLP's hidden layer.
        steps: Adam steps. ``None`` (the default) trains one epoch over the fit corpus,
            ceil(n / batch_size) steps, as BERT-flow does (``num_train_epochs=1.0`` at 32 sentence
            pairs, i.e. 64 sentences, a step), at most ``max_steps``. ``steps=0`` keeps the
            data-dependent initialisation.
        max_steps: the bound on the steps of an epoch-long fit, so that a large fit corpus costs a
            known amount (1,000 steps of 384-d vectors take about 10 s on 2 CPU cores).
        batch_size: vectors per step (the whole corpus if smaller); batches are reshuffled each epoch.
        lr: peak Adam learning rate (1e-3 as in Glow and BERT-flow), reached after a linear warm-up
            over the first 10% of the steps, then decayed linearly to 0.
        seed: seeds the initialisation and the batch order; fitting is deterministic on CPU.

    Needs more vectors than dimensions (fewer lie in a subspace, where the likelihood is unbounded)
    and dim >= 2 (the coupling splits the coordinates). Dimensions that are constant in the fit corpus
    (all-MiniLM-L6-v2 has such dead coordinates) hold no information: the flow models the others and
    maps the constant ones to 0 (``constant_dims_``).

    Learned state: ``mean_``, ``scale_`` (standardisation), ``active_`` / ``constant_dims_`` (the
    modelled and the constant dimensions), ``blocks_`` (list of dicts of float64
    arrays), ``history_`` (training loss per step: negative log-likelihood per dimension of the
    standardised batch), ``n_steps_`` (the steps trained), ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(500, 4)) @ np.array(
        ...     [[2.0, 1, 0, 0], [0, 1, 0, 0], [0, 0, 3, 1], [0, 0, 0, 1]])
        >>> f = Flow(steps=50).fit(X)
        >>> float(np.abs(f.inverse(f.transform(X)) - X).max()) < 1e-8
        True
    """

    name = "flow"
    order = 60

    def __init__(
        self,
        *,
        n_blocks: int = 4,
        hidden: int = 128,
        steps: int | None = None,
        max_steps: int = 1000,
        batch_size: int = 64,
        lr: float = 0.001,
        seed: int = 0,
    ) -> None:
        self.n_blocks = n_blocks
        self.hidden = hidden
        self.steps = steps
        self.max_steps = max_steps
        self.batch_size = batch_size
        self.lr = lr
        self.seed = seed

    # ---- fitting ----------------------------------------------------------------------------------
    def _validate(self, n: int, d: int) -> None:
        problems = []
        if d < 2:
            problems.append(f"needs dim >= 2 to split coordinates, got {d}")
        if n <= d:
            problems.append(
                f"needs more vectors than dimensions ({n} <= {d}): the likelihood is unbounded on a "
                "subspace; use a larger fit corpus"
            )
        for key in ("n_blocks", "hidden", "batch_size", "max_steps"):
            if int(getattr(self, key)) < 1:
                problems.append(f"{key} must be >= 1")
        if (self.steps is not None and self.steps < 0) or self.lr <= 0:
            problems.append("steps must be >= 0 and lr > 0")
        if problems:
            raise MethodError(f"method {self.spec!r}: " + "; ".join(problems))

    def fit(self, X: np.ndarray) -> Flow:
        X = self._check_input(X, fitting=True, min_rows=2)
        n, d = X.shape
        self._validate(n, d)
        mean, scale = X.mean(axis=0), X.std(axis=0)
        const = scale <= 1e-12 * max(float(np.abs(X).max()), 1e-300)
        active = np.flatnonzero(~const)
        if len(active) < 2 or n <= len(active):
            raise MethodError(
                f"method {self.spec!r}: only {len(active)} of {d} dimensions vary in the fit corpus; "
                "a flow needs at least 2 and fewer than the number of vectors"
            )
        steps = self.steps if self.steps is not None else min(-(-n // self.batch_size), self.max_steps)
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            blocks, history = _train(torch, (X[:, active] - mean[active]) / scale[active], self, steps)
        self.dim_ = d
        self.mean_ = mean
        self.scale_ = np.where(const, 1.0, scale)
        self.active_ = active
        self.constant_dims_ = tuple(int(i) for i in np.flatnonzero(const))
        self.blocks_ = blocks
        self.history_ = np.asarray(history)
        self.n_steps_ = int(steps)
        return self

    # ---- applying ---------------------------------------------------------------------------------
    def transform(self, X: np.ndarray) -> np.ndarray:
        """The latent z = f(x), float64, shape ``(n, dim)``; dimensions that were constant in the fit
        corpus carry no information and map to 0."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        Z = np.zeros_like(X)
        Z[:, self.active_], _ = _forward(self.blocks_, self._standardise(X), np)
        return Z

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        """x = f^-1(z), float64, shape ``(n, dim)``: ``inverse(transform(X))`` recovers ``X`` (constant
        dimensions come back as their fit-corpus value)."""
        self._check_fitted()
        Z = self._check_input(Z, fitting=False)
        X = np.tile(self.mean_, (len(Z), 1))
        X[:, self.active_] += _inverse(self.blocks_, Z[:, self.active_]) * self.scale_[self.active_]
        return X

    def log_likelihood(self, X: np.ndarray) -> float:
        """Mean log-density of the vectors under the flow, in nats per vector (original coordinates of
        the dimensions that vary in the fit corpus)."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        z, logdet = _forward(self.blocks_, self._standardise(X), np)
        return float(np.mean(_log_normal(z) + logdet) - np.log(self.scale_[self.active_]).sum())

    def _standardise(self, X: np.ndarray) -> np.ndarray:
        a = self.active_
        return (X[:, a] - self.mean_[a]) / self.scale_[a]


def _init_blocks(torch: Any, d: int, cfg: Flow, lower: Any, upper: Any) -> list[dict[str, Any]]:
    """The flow's blocks before training: random rotations in LU form, couplings that start as the identity
    (the ActNorm parameters are set from data afterwards)."""
    da, db = d // 2, d - d // 2
    blocks = []
    for _ in range(int(cfg.n_blocks)):
        q, _ = torch.linalg.qr(torch.randn(d, d))
        P, L, U = torch.linalg.lu(q)
        diag = torch.diagonal(U)
        blocks.append(
            {
                "P": P,
                "src": P.argmax(dim=0),
                "sign": torch.sign(diag),
                "bias": torch.zeros(d),
                "log_scale": torch.zeros(d),
                "L": (L * lower).requires_grad_(),
                "U": (U * upper).requires_grad_(),
                "log_s": torch.log(diag.abs()).requires_grad_(),
                "W1": (torch.randn(da, cfg.hidden) * (2.0 / da) ** 0.5).requires_grad_(),
                "b1": torch.zeros(cfg.hidden, requires_grad=True),
                "W2": torch.zeros(cfg.hidden, 2 * db, requires_grad=True),
                "b2": torch.zeros(2 * db, requires_grad=True),
            }
        )
    return blocks


def _train(torch: Any, X: np.ndarray, cfg: Flow, steps: int) -> tuple[list[dict[str, np.ndarray]], list[float]]:
    """Initialise and train the flow on standardised ``X`` for ``steps`` Adam steps; returns float64 numpy
    blocks and the loss curve."""
    n, d = X.shape
    data = torch.as_tensor(X, dtype=torch.float32)
    eye = torch.eye(d)
    lower, upper = torch.tril(torch.ones(d, d), -1), torch.triu(torch.ones(d, d), 1)
    blocks = _init_blocks(torch, d, cfg, lower, upper)

    def assemble(b: dict[str, Any]) -> dict[str, Any]:
        W = b["P"] @ (b["L"] * lower + eye) @ (b["U"] * upper + torch.diag(b["sign"] * torch.exp(b["log_s"])))
        return {**b, "W": W, "logdet_W": b["log_s"].sum()}

    def factored(b: dict[str, Any]) -> dict[str, Any]:
        """The same linear layer applied factor by factor, x @ P @ L @ U: a batch smaller than d never pays
        for the d x d x d products of assembling W (P is a permutation: a column gather)."""
        Lm = b["L"] * lower + eye
        Um = b["U"] * upper + torch.diag(b["sign"] * torch.exp(b["log_s"]))
        return {**b, "W": _Factored(b["src"], Lm, Um), "logdet_W": b["log_s"].sum()}

    # data-dependent ActNorm initialisation, block by block, on a random subset of up to 4096 vectors
    with torch.no_grad():
        x = data[torch.randperm(n)[:4096]]
        for b in blocks:
            b["bias"] = -x.mean(dim=0)
            b["log_scale"] = -torch.log(x.std(dim=0) + 1e-6)
            x, _ = _forward([assemble(b)], x, torch)
    for b in blocks:
        b["bias"].requires_grad_()
        b["log_scale"].requires_grad_()
    params = [b[k] for b in blocks for k in ("bias", "log_scale", "L", "U", "log_s", "W1", "b1", "W2", "b2")]
    opt = torch.optim.Adam(params, lr=cfg.lr, fused=True)
    # linear warm-up over the first 10% of the steps (Adam's first updates move every weight by ~lr at
    # once, which destabilises the d x d linear layers), then linear decay to 0 (the last steps average
    # out batch noise instead of jumping around the optimum)
    total, warm = max(steps, 1), max(steps // 10, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min((step + 1) / warm, 1.0 - step / total))
    bs = min(int(cfg.batch_size), n)
    history: list[float] = []
    perm, pos = torch.randperm(n), 0
    for _ in range(steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n), 0
        batch = data[perm[pos : pos + bs]]
        pos += bs
        z, logdet = _forward([factored(b) for b in blocks], batch, torch)
        loss = -(_log_normal(z) + logdet).mean() / d
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
        opt.step()
        sched.step()
        history.append(float(loss.detach()))
    with torch.no_grad():
        return _to_numpy(blocks, lower, upper), history


def _to_numpy(blocks: list[dict[str, Any]], lower: Any, upper: Any) -> list[dict[str, np.ndarray]]:
    """The trained blocks as float64 numpy arrays, with W assembled (and inverted) in float64 so that
    log|det W| = sum(log_s) holds to float64 precision."""
    d = lower.shape[0]
    low, up = lower.double().numpy(), upper.double().numpy()
    out = []
    for b in blocks:
        a = {k: v.detach().double().numpy() for k, v in b.items() if k != "src"}
        W = a["P"] @ (a["L"] * low + np.eye(d)) @ (a["U"] * up + np.diag(a["sign"] * np.exp(a["log_s"])))
        out.append(
            {
                "bias": a["bias"],
                "log_scale": a["log_scale"],
                "W": W,
                "W_inv": np.linalg.inv(W),
                "logdet_W": float(a["log_s"].sum()),
                "W1": a["W1"],
                "b1": a["b1"],
                "W2": a["W2"],
                "b2": a["b2"],
            }
        )
    return out
