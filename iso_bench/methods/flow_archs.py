"""The two architectures of ``flow`` (:mod:`iso_bench.methods.flow`) and the autograd training of the affine one.

An architecture is a namespace of functions over its parameters: ``init``, ``data_init``, ``trainer`` (what
computes a step's loss and gradient), ``forward``/``inverse`` in numpy (the fitted map) and, for autograd
training, ``train_forward``, ``trainables``, ``move`` and ``to_numpy``. torch is passed in by the caller
(imported inside ``Flow.fit``), so importing this module loads numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods import glow
from iso_bench.methods.glow_trainer import Trainer

_LOG_2PI = float(np.log(2.0 * np.pi))


def log_normal(z: Any) -> Any:
    """log N(z; 0, I) per row, in numpy or torch."""
    return -0.5 * (z * z).sum(axis=1) - 0.5 * z.shape[1] * _LOG_2PI


class Autograd:
    """Training through autograd: the trained tensors of ``params`` become views of one flat tensor
    ``theta`` on ``device``, their gradients views of ``grad``, and :meth:`loss_and_grad` back-propagates
    ``arch.train_forward``'s loss into them."""

    def __init__(self, torch: Any, arch: Any, params: Any, device: Any) -> None:
        self.torch, self.arch, self.params = torch, arch, params
        trained = arch.trainables(params)
        arch.move(params, device)  # the fixed tensors
        self.theta = torch.cat([t.detach().reshape(-1) for t in trained]).to(device)
        self.grad = torch.zeros_like(self.theta)
        offset = 0
        for t in trained:
            size = t.numel()
            t.data = self.theta[offset : offset + size].view_as(t)  # shares theta's memory from now on
            t.grad = self.grad[offset : offset + size].view_as(t)  # backward adds into it in place
            offset += size

    def loss_and_grad(self, x: Any) -> Any:
        self.grad.zero_()
        z, logdet = self.arch.train_forward(self.torch, self.params, x)
        loss = -(log_normal(z) + logdet).mean() / z.shape[1]
        loss.backward()
        return loss.detach()

    def to_numpy(self) -> Any:
        return self.arch.to_numpy(self.params)


class Glow:
    """``arch="glow"``: :mod:`iso_bench.methods.glow` with the method's levels, depth, width, permutation,
    trained by :class:`iso_bench.methods.glow_trainer.Trainer` (gradients by hand, no autograd)."""

    @staticmethod
    def init(torch: Any, d: int, cfg: Any) -> Any:
        return glow.init(torch, d, int(cfg.levels), int(cfg.depth), int(cfg.width), cfg.permutation)

    data_init = staticmethod(glow.data_init)
    trainer = staticmethod(Trainer)
    forward = staticmethod(glow.forward)
    inverse = staticmethod(glow.inverse)


class Affine:
    """``arch="affine"``: ``n_blocks`` blocks of actnorm, LU linear layer and tanh-bounded affine coupling."""

    KEYS = ("bias", "log_scale", "L", "U", "log_s", "W1", "b1", "W2", "b2")
    """The trained tensors of a block."""

    @staticmethod
    def init(torch: Any, d: int, cfg: Any) -> list[dict[str, Any]]:
        """Random rotations in LU form and couplings that start as the identity (ActNorm set by data_init)."""
        da, db = d // 2, d - d // 2
        blocks = []
        for _ in range(int(cfg.n_blocks)):
            lu = glow.lu_init(torch, d)
            blocks.append({
                **lu, "bias": torch.zeros(d), "log_scale": torch.zeros(d),
                "W1": (torch.randn(da, cfg.hidden) * (2.0 / da) ** 0.5).requires_grad_(),
                "b1": torch.zeros(cfg.hidden, requires_grad=True),
                "W2": torch.zeros(cfg.hidden, 2 * db, requires_grad=True),
                "b2": torch.zeros(2 * db, requires_grad=True),
            })
        return blocks

    @staticmethod
    def data_init(torch: Any, blocks: list[dict[str, Any]], x: Any) -> None:
        """Each block's ActNorm in turn gets mean 0 and variance 1 per coordinate on ``x``."""
        with torch.no_grad():
            for b in blocks:
                b["bias"] = -x.mean(dim=0)
                b["log_scale"] = -torch.log(x.std(dim=0) + 1e-6)
                lower, upper = glow.lu_factors(torch, b)
                x, _ = Affine.forward([{**b, "W": b["P"] @ lower @ upper, "logdet_W": b["log_s"].sum()}], x, torch)

    @staticmethod
    def trainables(blocks: list[dict[str, Any]]) -> list[Any]:
        return [b[k].requires_grad_() for b in blocks for k in Affine.KEYS]

    @staticmethod
    def move(blocks: list[dict[str, Any]], device: Any) -> None:
        """The fixed tensors (the permutations and signs of the linear layers) to ``device``."""
        for b in blocks:
            for key in ("P", "src", "sign"):
                b[key] = b[key].to(device)

    @staticmethod
    def trainer(torch: Any, blocks: list[dict[str, Any]], device: Any) -> Autograd:
        return Autograd(torch, Affine, blocks, device)

    @staticmethod
    def train_forward(torch: Any, blocks: list[dict[str, Any]], x: Any) -> tuple[Any, Any]:
        factored = []
        for b in blocks:
            lower, upper = glow.lu_factors(torch, b)
            factored.append({**b, "W": glow.Factored(b["src"], lower, upper), "logdet_W": b["log_s"].sum()})
        return Affine.forward(factored, x, torch)

    @staticmethod
    def to_numpy(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The trained blocks as float64 numpy arrays, with W assembled (and inverted) in float64 so that
        log|det W| = sum(log_s) holds to float64 precision."""
        keys = ("bias", "log_scale", "W1", "b1", "W2", "b2")
        return [{**{k: b[k].detach().cpu().double().numpy() for k in keys}, **glow.lu_numpy(b)} for b in blocks]

    @staticmethod
    def coupling(b: dict[str, Any], xa: Any, xp: Any) -> tuple[Any, Any]:
        h = xa @ b["W1"] + b["b1"]
        h = h * (h > 0)  # ReLU, in both numpy and torch
        out = h @ b["W2"] + b["b2"]
        nb = out.shape[1] // 2
        return xp.tanh(out[:, :nb]), out[:, nb:]

    @staticmethod
    def forward(blocks: list[dict[str, Any]], x: Any, xp: Any) -> tuple[Any, Any]:
        """Map ``x`` (standardised) to ``z``; also return log|det dz/dx| per row. ``xp`` is numpy or torch."""
        logdet = 0.0
        for b in blocks:
            x = (x + b["bias"]) * xp.exp(b["log_scale"])
            x = x @ b["W"]
            da = b["W1"].shape[0]
            log_s, t = Affine.coupling(b, x[:, :da], xp)
            x = xp.concatenate([x[:, :da], x[:, da:] * xp.exp(log_s) + t], axis=1)
            logdet = logdet + b["log_scale"].sum() + b["logdet_W"] + log_s.sum(axis=1)
        return x, logdet

    @staticmethod
    def inverse(blocks: list[dict[str, Any]], z: np.ndarray) -> np.ndarray:
        for b in reversed(blocks):
            da = b["W1"].shape[0]
            log_s, t = Affine.coupling(b, z[:, :da], np)
            z = np.concatenate([z[:, :da], (z[:, da:] - t) * np.exp(-log_s)], axis=1)
            z = z @ b["W_inv"]
            z = z * np.exp(-b["log_scale"]) - b["bias"]
        return z


ARCHITECTURES: dict[str, Any] = {"glow": Glow, "affine": Affine}
