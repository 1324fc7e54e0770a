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
:func:`data_init`, then :class:`iso_bench.methods.glow_trainer.Trainer`, which holds the trained tensors as
one flat tensor and computes the loss and its gradient by hand, without autograd; :func:`trainables` and
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
