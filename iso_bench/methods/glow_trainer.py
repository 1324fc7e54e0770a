"""The hand-written training of BERT-flow's Glow (:mod:`iso_bench.methods.glow`): :class:`Trainer` holds the
trained tensors as one flat tensor and computes the loss and its gradient layer by layer, without autograd.
Like ``glow``, it registers no method."""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.glow import (
    _FIXED,
    _LOG_2PI,
    LOGSCALE_FACTOR,
    Levels,
    to_numpy,
)

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
