"""The Glow of BERT-flow, the default architecture of ``flow`` (:mod:`iso_bench.methods.flow`).

BERT-flow (Li et al., EMNLP 2020) trains a Glow (Kingma & Dhariwal 2018) in the configuration its runs
default to, ``config_l3_d3_w32``: 3 levels of 3 steps, additive couplings, coupling networks of width 32,
a fixed channel permutation, actnorm, and a standard normal prior. It treats a sentence vector of d
coordinates as an image of one pixel with d channels and does not squeeze, so each 1 x 1 convolution is a
d x d linear map of the vector and each convolutional coupling network is a multilayer perceptron. Here:

* **level** l runs ``depth`` steps on its c_l coordinates; between levels the last c_l // 2 coordinates
  leave as part of the latent, under the N(0, I) prior (BERT-flow's split prior has mean 0 and scale 1
  whatever the kept half holds), and the first c_l - c_l // 2 go on to the next level;
* **step** = actnorm, then the permutation, then an additive coupling;
* **actnorm**: x -> (x + b) * exp(3 s) per coordinate (the factor 3 is Glow's ``logscale_factor``),
  initialised from data so that its output has mean 0 and variance 1; log-determinant 3 * sum(s);
* **permutation**: ``"reverse"`` (BERT-flow's config, ``permutation: true``) reverses the order of the
  coordinates, log-determinant 0; ``"invconv"`` is Glow's learned invertible 1 x 1 convolution, a
  linear map W = P L (U + diag(sign * exp(log_s))) initialised from a random rotation, log-determinant
  sum(log_s);
* **additive coupling**: the second half of the coordinates is shifted by a network of the first half,
  x2 -> x2 + NN(x1), log-determinant 0. NN: a linear layer to ``width`` units, actnorm, ReLU, a linear
  layer ``width`` -> ``width``, actnorm, ReLU, and a linear layer with bias and per-output scale
  exp(3 s) whose weights, bias and s start at 0, so every coupling starts as the identity. The
  other linear weights start as N(0, 0.05^2), as in BERT-flow;
* **latent**: z = (the coordinates level 0 let go, those of level 1, ..., the last level's output), the
  order of BERT-flow's ``concat(eps + [z])``; the prior of all of z is N(0, I), not learned.

With an odd number c of coordinates a coupling conditions on the first c // 2 and shifts the other
c - c // 2. The parameters live in a list of levels, each a list of step dicts of arrays: torch
tensors while training, float64 numpy arrays afterwards (:func:`to_numpy`, :func:`forward`,
:func:`inverse`). :func:`forward` is written once for numpy and torch. Training: :func:`init`,
:func:`data_init`, then :class:`Trainer`, which holds the trained tensors as one flat tensor and
computes the loss and its gradient by hand, without autograd; :func:`trainables` and
:func:`train_forward` give the same loss through autograd, the reference the tests check
:class:`Trainer`'s gradient against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PERMUTATIONS = ("reverse", "invconv")
_LOG_2PI = float(np.log(2.0 * np.pi))
LOGSCALE_FACTOR = 3.0
"""Glow's ``logscale_factor``: an actnorm or output scale is exp(3 s), so s moves 3 times as fast."""
INIT_STD = 0.05
"""Standard deviation of the initial weights of the coupling networks' first two layers (BERT-flow's)."""
_FIXED = ("P", "src", "sign")
"""Parameters of the invertible 1 x 1 convolution that stay as initialised (Glow's)."""

Levels = list[list[dict[str, Any]]]


def level_sizes(dim: int, levels: int) -> list[int]:
    """The number of coordinates each level transforms: ``dim``, then each split keeps c - c // 2."""
    sizes = [dim]
    for _ in range(levels - 1):
        sizes.append(sizes[-1] - sizes[-1] // 2)
    return sizes


def min_dim(levels: int) -> int:
    """The fewest coordinates for which every level's couplings have a half to condition on and a half
    to shift (the last level needs 2): 2^(levels - 1) + 1."""
    return 2 ** (levels - 1) + 1


# ---- the invertible linear map in LU form (also the linear layer of the affine architecture) ----------
def lu_init(torch: Any, d: int) -> dict[str, Any]:
    """A random rotation of R^d in LU form: fixed P (also as the column gather ``src``) and ``sign``;
    trainable strictly lower L, strictly upper U and ``log_s`` (log|diagonal of U|)."""
    q, _ = torch.linalg.qr(torch.randn(d, d))
    P, L, U = torch.linalg.lu(q)
    diag = torch.diagonal(U)
    ones = torch.ones(d, d)
    return {
        "P": P,
        "src": P.argmax(dim=0),
        "sign": torch.sign(diag),
        "L": (L * torch.tril(ones, -1)).requires_grad_(),
        "U": (U * torch.triu(ones, 1)).requires_grad_(),
        "log_s": torch.log(diag.abs()).requires_grad_(),
    }


class Factored:
    """``x @ Factored(src, L, U)`` == ``x @ P @ L @ U`` for the permutation matrix P with P[src[j], j] = 1:
    the linear map applied factor by factor, so that a batch smaller than d never pays for the d x d x d
    products of assembling W (P is a column gather)."""

    def __init__(self, src: Any, L: Any, U: Any) -> None:
        self.src, self.L, self.U = src, L, U

    def __rmatmul__(self, x: Any) -> Any:
        return x[:, self.src] @ self.L @ self.U


def lu_factors(torch: Any, p: dict[str, Any]) -> tuple[Any, Any]:
    """The unit lower and the upper factor of W = P L U from the parameters of :func:`lu_init` (on the
    device and in the dtype of ``L``)."""
    d = p["L"].shape[0]
    ones = p["L"].new_ones(d, d)
    lower = p["L"] * torch.tril(ones, -1) + torch.diag(ones[0])
    upper = p["U"] * torch.triu(ones, 1) + torch.diag(p["sign"] * torch.exp(p["log_s"]))
    return lower, upper


def lu_numpy(p: dict[str, Any]) -> dict[str, Any]:
    """W, its inverse and log|det W| = sum(log_s) in float64, from trained :func:`lu_init` parameters."""
    a = {k: p[k].detach().cpu().double().numpy() for k in ("P", "L", "U", "sign", "log_s")}
    d = a["L"].shape[0]
    W = a["P"] @ (np.tril(a["L"], -1) + np.eye(d)) @ (np.triu(a["U"], 1) + np.diag(a["sign"] * np.exp(a["log_s"])))
    return {"W": W, "W_inv": np.linalg.inv(W), "logdet_W": float(a["log_s"].sum())}


# ---- building and training (torch) ----------------------------------------------------------------
def init(torch: Any, d: int, levels: int, depth: int, width: int, permutation: str) -> Levels:
    """The Glow's parameters before training, for ``d`` coordinates (actnorms at 0: :func:`data_init`
    sets them). Draws from torch's global generator, which the caller seeds."""
    out = []
    for c in level_sizes(d, levels):
        half, rest = c // 2, c - c // 2
        steps = []
        for _ in range(depth):
            step: dict[str, Any] = {"bias": torch.zeros(c), "logs": torch.zeros(c)}
            if permutation == "invconv":
                step.update(lu_init(torch, c))
            step.update(
                W1=torch.randn(half, width) * INIT_STD,
                a1_bias=torch.zeros(width), a1_logs=torch.zeros(width),
                W2=torch.randn(width, width) * INIT_STD,
                a2_bias=torch.zeros(width), a2_logs=torch.zeros(width),
                W3=torch.zeros(width, rest), b3=torch.zeros(rest), logs3=torch.zeros(rest),
            )
            steps.append(step)
        out.append(steps)
    return out


def data_init(torch: Any, params: Levels, x: Any) -> None:
    """Glow's data-dependent initialisation: every actnorm, in the order the data reaches it, gets the
    bias and scale that give its output on ``x`` mean 0 and variance 1 per coordinate."""
    with torch.no_grad():
        forward(_materialise(torch, params), x, torch, init=True)


def trainables(params: Levels) -> list[Any]:
    """The trained tensors (everything but the fixed permutation parts), marked as requiring gradients."""
    out = []
    for steps in params:
        for step in steps:
            for key, value in step.items():
                if key not in _FIXED:
                    out.append(value.requires_grad_())
    return out


def train_forward(torch: Any, params: Levels, x: Any) -> tuple[Any, Any]:
    """:func:`forward` on torch tensors with gradients (the 1 x 1 convolutions applied factor by factor)."""
    return forward(_materialise(torch, params), x, torch)


def _materialise(torch: Any, params: Levels) -> Levels:
    """The steps with their 1 x 1 convolutions (if any) as a :class:`Factored` ``W`` and its ``logdet_W``;
    the dicts share the tensors of ``params``, so :func:`data_init` writes through them."""
    if not any("L" in step for steps in params for step in steps):
        return params
    out = []
    for steps in params:
        level = []
        for step in steps:
            lower, upper = lu_factors(torch, step)
            level.append({**step, "W": Factored(step["src"], lower, upper), "logdet_W": step["log_s"].sum(),
                          "_owner": step})
        out.append(level)
    return out


def to_numpy(params: Levels) -> Levels:
    """The trained parameters as float64 numpy arrays (1 x 1 convolutions assembled, with their inverse)."""
    out = []
    for steps in params:
        level = []
        for step in steps:
            a = {k: v.detach().cpu().double().numpy() for k, v in step.items()
                 if k not in (*_FIXED, "L", "U", "log_s")}
            if "L" in step:
                a.update(lu_numpy(step))
            level.append(a)
        out.append(level)
    return out


# ---- training without autograd (torch) --------------------------------------------------------------
_SCALED = (("logs", "bias"), ("a1_logs", "a1_bias"), ("a2_logs", "a2_bias"), ("logs3", "b3"))
"""A step's scaled layers, (log-scale s, bias b): output (v + b) * exp(3 s) for the layer's input v (the
actnorm's, the coupling network's two actnorms', its last linear layer's)."""
_WEIGHTS = ("W1", "W2", "W3")
_LU = ("L", "U", "log_s")


class Trainer:
    """The Glow of ``params`` (after :func:`data_init`) as training holds it: every trained tensor a view
    of one flat tensor ``theta`` on ``device`` (what the optimiser and the gradient clipping update, as
    one tensor), and :meth:`loss_and_grad` computing the loss and writing its gradient into ``grad`` by
    the chain rule, written out layer by layer instead of through autograd. A training step of
    BERT-flow's Glow on a batch of 64 vectors is some hundreds of tensor operations so small that their
    number and autograd's bookkeeping, more than their arithmetic, set the cost; this form needs fewer
    operations and no graph. The map and the loss are :func:`forward`'s; the test suite checks the
    gradient against autograd's.

    The layout of ``theta``: every log-scale s, then every bias b in the same order (the gradient of a
    scaled layer's b is exp(3 s) times the batch sum of its output's gradient, that of s 3 times the
    batch sum of that gradient times the output: both factors are applied once, to the whole block),
    then the weights. The channel reversals move no data: each step's tensors are stored in the order
    of coordinates in which the batch reaches them (after a reversal, the reversed order: the following
    actnorm's bias and log-scale, the rows of the next coupling network's first weights, the columns,
    bias and log-scale of its last layer), so a reversal is a change of stored order, made once here and
    undone by :meth:`levels`. A 1 x 1 convolution gathers its input's columns anyway (in the stored
    order) and leaves its output in order. Which half of the stored coordinates a coupling conditions
    on, and which a level hands to the latent, follow from that order.
    """

    def __init__(self, torch: Any, params: Levels, device: Any = "cpu") -> None:
        self.torch = torch
        self.relu_grad = torch.ops.aten.threshold_backward.default  # relu's backward, as autograd runs it
        self.dim = params[0][0]["bias"].shape[0]
        self.fixed = [[{k: step[k] for k in _FIXED if k in step} for step in steps] for steps in params]
        dtype = params[0][0]["bias"].dtype
        self.plan: list[tuple[list[dict[str, Any]], slice, slice]] = []
        reversed_ = False  # whether the coordinates are stored in the reverse of their logical order
        for steps in params:
            c = steps[0]["bias"].shape[0]
            half = c // 2
            level = []
            for step in steps:
                invconv = "L" in step
                mid = False if invconv else not reversed_  # the stored order the coupling sees
                level.append({"reversed_in": reversed_, "reversed_mid": mid, "invconv": invconv,
                              "x1": slice(c - half, c) if mid else slice(0, half),
                              "x2": slice(0, c - half) if mid else slice(half, c)})
                if invconv:
                    src = (c - 1 - step["src"]) if reversed_ else step["src"]
                    ones = torch.ones(c, c, dtype=dtype, device=device)
                    level[-1].update(src=src.to(device), inv_src=src.argsort().to(device),
                                     sign=step["sign"].to(device=device, dtype=dtype),
                                     lower_mask=torch.tril(ones, -1), upper_mask=torch.triu(ones, 1),
                                     eye=torch.diag(ones[0]), lower=torch.empty_like(ones),
                                     upper=torch.empty_like(ones))
                reversed_ = mid
            keep = c - half  # the level keeps the logical coordinates [0, keep), lets [keep, c) go
            self.plan.append((level, slice(c - keep, c) if reversed_ else slice(0, keep),
                              slice(0, c - keep) if reversed_ else slice(keep, c)))
        where = [(li, si) for li, steps in enumerate(params) for si in range(len(steps))]
        keys = [[(li, si, s) for li, si in where for s, _ in _SCALED],
                [(li, si, b) for li, si in where for _, b in _SCALED],
                [(li, si, w) for li, si in where for w in (*_WEIGHTS, *(_LU if "L" in params[li][si] else ()))]]
        self.layout: list[tuple[int, int, str, int, tuple[int, ...]]] = []
        offset = 0
        for li, si, key in (entry for block in keys for entry in block):
            shape = tuple(params[li][si][key].shape)
            self.layout.append((li, si, key, offset, shape))
            offset += int(np.prod(shape, dtype=np.int64))
        self.n_scales = sum(int(params[li][si][key].numel()) for li, si, key in keys[0])
        self.theta = torch.cat([self._reorder(li, si, key, params[li][si][key].detach()).reshape(-1)
                                for li, si, key, _, _ in self.layout]).to(device=device, dtype=dtype)
        self.grad = torch.zeros_like(self.theta)
        self.scales = torch.empty(self.n_scales, dtype=dtype, device=device)  # exp(3 s) of every s
        # log|det| = coef . theta: 3 per actnorm log-scale, 1 per log|u_ii| of a 1 x 1 convolution
        self.coef = torch.zeros_like(self.theta)
        for li, si, key, offset, shape in self.layout:
            step, size = self.plan[li][0][si], int(np.prod(shape, dtype=np.int64))
            step[key] = self.theta[offset : offset + size].view(shape)
            step["g_" + key] = self.grad[offset : offset + size].view(shape)
            if offset < self.n_scales:
                step["e_" + key] = self.scales[offset : offset + size].view(shape)
            if key in _WEIGHTS:
                step[key + "T"] = step[key].T
            if key in ("logs", "log_s"):
                self.coef[offset : offset + size] = LOGSCALE_FACTOR if key == "logs" else 1.0

    def _reorder(self, li: int, si: int, key: str, value: Any) -> Any:
        """A tensor between its logical and its stored order (the map is its own inverse)."""
        step = self.plan[li][0][si]
        if key in ("bias", "logs"):
            return value.flip(0) if step["reversed_in"] else value
        if key in ("W1", "b3", "logs3"):
            return value.flip(0) if step["reversed_mid"] else value
        if key == "W3":
            return value.flip(1) if step["reversed_mid"] else value
        return value

    def levels(self, flat: Any | None = None) -> Levels:
        """``flat`` (by default ``theta``; ``grad`` gives the gradient) as levels of step dicts of CPU
        tensors in the logical order, with the fixed tensors of the 1 x 1 convolutions."""
        flat = (self.theta if flat is None else flat).detach().cpu()
        out = [[dict(fixed) for fixed in steps] for steps in self.fixed]
        for li, si, key, offset, shape in self.layout:
            size = int(np.prod(shape, dtype=np.int64))
            out[li][si][key] = self._reorder(li, si, key, flat[offset : offset + size].view(shape))
        return out

    def to_numpy(self) -> Levels:
        """The trained parameters as :func:`to_numpy` gives them (float64 numpy arrays, logical order)."""
        return to_numpy(self.levels())

    def loss_and_grad(self, x: Any) -> Any:
        """The loss on the batch ``x``, a 0-d tensor: the mean over the batch of the negative
        log-likelihood per dimension, from :func:`forward` and the N(0, I) prior; its gradient with
        respect to ``theta`` goes to ``grad``."""
        torch = self.torch
        n = x.shape[0]
        torch.mul(self.theta[: self.n_scales], LOGSCALE_FACTOR, out=self.scales).exp_()
        saved: list[tuple[Any, ...]] = []  # what the backward pass needs
        latents = []
        for li, (steps, keep, out) in enumerate(self.plan):
            for step in steps:
                a = (x + step["bias"]).mul_(step["e_logs"])  # actnorm
                a_in = p = m = None
                if step["invconv"]:  # a @ P L U, as a column gather and two products
                    torch.mul(step["L"], step["lower_mask"], out=step["lower"]).add_(step["eye"])
                    torch.mul(step["U"], step["upper_mask"], out=step["upper"])
                    step["upper"].diagonal().add_(step["sign"] * step["log_s"].exp())
                    a_in, p = a, a[:, step["src"]]
                    m = p @ step["lower"]
                    a = m @ step["upper"]
                x1 = a[:, step["x1"]]  # the additive coupling: x2 += NN(x1)
                u1 = torch.addmm(step["a1_bias"], x1, step["W1"]).mul_(step["e_a1_logs"])
                r1 = u1.clamp_min(0.0)
                u2 = torch.addmm(step["a2_bias"], r1, step["W2"]).mul_(step["e_a2_logs"])
                r2 = u2.clamp_min(0.0)
                t = torch.addmm(step["b3"], r2, step["W3"]).mul_(step["e_logs3"])
                x = a.clone()
                x[:, step["x2"]].add_(t)
                saved.append((a, x1, u1, r1, u2, r2, t, a_in, p, m))
            if li < len(self.plan) - 1:
                latents.append(x[:, out])
                x = x[:, keep]
        latents.append(x)
        sumsq = sum((z * z).sum() for z in latents)
        loss = (0.5 * sumsq / n - torch.dot(self.coef, self.theta)) / self.dim + 0.5 * _LOG_2PI
        # backward: d loss / d z = z / (n d); log|det|'s part is added at the end
        scale = 1.0 / (n * self.dim)
        g = latents[-1] * scale
        for li in reversed(range(len(self.plan))):
            steps, keep, out = self.plan[li]
            if li < len(self.plan) - 1:
                g_level = g.new_empty(n, steps[0]["bias"].shape[0])
                g_level[:, keep] = g
                torch.mul(latents[li], scale, out=g_level[:, out])
                g = g_level
            for si in reversed(range(len(steps))):
                step = steps[si]
                a, x1, u1, r1, u2, r2, t, a_in, p, m = saved.pop()
                g_t = g[:, step["x2"]]  # the gradient of the shift t
                torch.sum(g_t * t, 0, out=step["g_logs3"])
                torch.sum(g_t, 0, out=step["g_b3"])
                g_t = g_t * step["e_logs3"]
                torch.mm(r2.T, g_t, out=step["g_W3"])
                g_u = self.relu_grad(g_t @ step["W3T"], r2, 0)
                torch.sum(g_u * u2, 0, out=step["g_a2_logs"])
                torch.sum(g_u, 0, out=step["g_a2_bias"])
                g_u.mul_(step["e_a2_logs"])
                torch.mm(r1.T, g_u, out=step["g_W2"])
                g_u = self.relu_grad(g_u @ step["W2T"], r1, 0)
                torch.sum(g_u * u1, 0, out=step["g_a1_logs"])
                torch.sum(g_u, 0, out=step["g_a1_bias"])
                g_u.mul_(step["e_a1_logs"])
                torch.mm(x1.T, g_u, out=step["g_W1"])
                g[:, step["x1"]].addmm_(g_u, step["W1T"])  # x1 also passes through unchanged
                if step["invconv"]:
                    g_upper = m.T @ g
                    torch.mul(g_upper, step["upper_mask"], out=step["g_U"])
                    torch.mul(g_upper.diagonal(), step["upper"].diagonal(), out=step["g_log_s"])
                    g = g @ step["upper"].T
                    torch.mul(p.T @ g, step["lower_mask"], out=step["g_L"])
                    g = (g @ step["lower"].T)[:, step["inv_src"]]
                    a = a_in
                torch.sum(g * a, 0, out=step["g_logs"])
                torch.sum(g, 0, out=step["g_bias"])
                if li or si:  # the gradient of the batch itself is not needed
                    g = g.mul_(step["e_logs"])
        k = self.n_scales
        self.grad[:k].mul_(LOGSCALE_FACTOR)
        self.grad[k : 2 * k].mul_(self.scales)
        self.grad.sub_(self.coef, alpha=1.0 / self.dim)
        return loss


# ---- the map (numpy or torch) ---------------------------------------------------------------------
def _actnorm(step: dict[str, Any], prefix: str, x: Any, xp: Any, init: bool) -> Any:
    """(x + bias) * exp(3 * logs); with ``init``, first set bias and logs from ``x`` (torch only)."""
    if init:
        owner = step.get("_owner", step)
        owner[prefix + "bias"] = -x.mean(axis=0)
        centred = x + owner[prefix + "bias"]
        owner[prefix + "logs"] = -xp.log(xp.sqrt((centred * centred).mean(axis=0)) + 1e-6) / LOGSCALE_FACTOR
        step[prefix + "bias"], step[prefix + "logs"] = owner[prefix + "bias"], owner[prefix + "logs"]
        return centred * xp.exp(LOGSCALE_FACTOR * step[prefix + "logs"])  # centred is x + bias
    return (x + step[prefix + "bias"]) * xp.exp(LOGSCALE_FACTOR * step[prefix + "logs"])


def shift(step: dict[str, Any], x1: Any, xp: Any, init: bool = False) -> Any:
    """The additive coupling's shift NN(x1) of the second half of the coordinates."""
    h = _actnorm(step, "a1_", x1 @ step["W1"], xp, init)
    h = h * (h > 0)
    h = _actnorm(step, "a2_", h @ step["W2"], xp, init)
    h = h * (h > 0)
    return (h @ step["W3"] + step["b3"]) * xp.exp(LOGSCALE_FACTOR * step["logs3"])


def couple(step: dict[str, Any], x: Any, xp: Any, init: bool = False) -> Any:
    """The additive coupling (x1, x2) -> (x1, x2 + NN(x1)): its Jacobian is unit triangular, so it
    adds nothing to the log-determinant."""
    half = step["W1"].shape[0]
    return xp.concatenate([x[:, :half], x[:, half:] + shift(step, x[:, :half], xp, init)], axis=1)


def step_forward(step: dict[str, Any], x: Any, xp: Any, init: bool = False) -> tuple[Any, Any, Any]:
    """One step: ``(y, actnorm log-determinant, permutation log-determinant)``; the coupling adds none."""
    x = _actnorm(step, "", x, xp, init)
    logdet_actnorm = LOGSCALE_FACTOR * step["logs"].sum()
    if "W" in step:
        x, logdet_perm = x @ step["W"], step["logdet_W"]
    else:
        x, logdet_perm = xp.flip(x, (1,)), 0.0
    return couple(step, x, xp, init), logdet_actnorm, logdet_perm


def forward(params: Levels, x: Any, xp: Any, init: bool = False) -> tuple[Any, Any]:
    """Map ``x`` to the latent z; also return log|det dz/dx| (the same for every row: the sum of the
    actnorm and 1 x 1 convolution terms). ``xp`` is numpy or torch.

    A single row takes the step-by-step path: numpy's product of one row that is a reversed (negative-stride)
    view, which that path makes, is not the product of the same row stored in order, so the faster path
    would differ from it there in the last bit."""
    if xp is np and not init and x.shape[0] > 1:
        return _forward_numpy(params, x)
    return _forward_steps(params, x, xp, init)


def _forward_steps(params: Levels, x: Any, xp: Any, init: bool = False) -> tuple[Any, Any]:
    """:func:`forward`, step by step, in numpy or torch (the one that trains and initialises)."""
    logdet: Any = 0.0
    latents = []
    for level, steps in enumerate(params):
        for step in steps:
            x, logdet_actnorm, logdet_perm = step_forward(step, x, xp, init)
            logdet = logdet + logdet_actnorm + logdet_perm
        if level < len(params) - 1:
            keep = x.shape[1] - x.shape[1] // 2
            latents.append(x[:, keep:])
            x = x[:, :keep]
    latents.append(x)
    return xp.concatenate(latents, axis=1), logdet


def _forward_numpy(params: Levels, x: np.ndarray) -> tuple[np.ndarray, Any]:
    """:func:`forward` in numpy with the same arithmetic, element for element, in fewer passes over the rows
    (a transform's cost): each step's actnorm writes one new array, already in the order the reversal
    permutation puts it in (``flip((x + b) * e) = (flip(x) + flip(b)) * flip(e)``), and the coupling adds its
    shift to the second half in place instead of concatenating the halves."""
    logdet: Any = 0.0
    latents = []
    for level, steps in enumerate(params):
        for step in steps:
            scale = np.exp(LOGSCALE_FACTOR * step["logs"])
            if "W" in step:
                y = x + step["bias"]
                y *= scale
                y, logdet_perm = y @ step["W"], step["logdet_W"]
            else:
                y = x[:, ::-1] + step["bias"][::-1]
                y *= scale[::-1]
                logdet_perm = 0.0
            half = step["W1"].shape[0]
            y[:, half:] += shift(step, y[:, :half], np)
            logdet = logdet + LOGSCALE_FACTOR * step["logs"].sum() + logdet_perm
            x = y
        if level < len(params) - 1:
            keep = x.shape[1] - x.shape[1] // 2
            latents.append(x[:, keep:])
            x = x[:, :keep]
    latents.append(x)
    return np.concatenate(latents, axis=1), logdet


def inverse(params: Levels, z: np.ndarray) -> np.ndarray:
    """x = f^-1(z) in numpy: the levels backwards, each taking back the coordinates it let go."""
    d = z.shape[1]
    sizes = [steps[0]["bias"].shape[0] for steps in params]
    x = z[:, d - sizes[-1] :]
    for level in reversed(range(len(params))):
        if level < len(params) - 1:
            x = np.concatenate([x, z[:, d - sizes[level] : d - sizes[level + 1]]], axis=1)
        for step in reversed(params[level]):
            half = step["W1"].shape[0]
            x = np.concatenate([x[:, :half], x[:, half:] - shift(step, x[:, :half], np)], axis=1)
            x = x @ step["W_inv"] if "W_inv" in step else x[:, ::-1]
            x = x * np.exp(-LOGSCALE_FACTOR * step["logs"]) - step["bias"]
    return x
