"""``flow``: BERT-flow (Li et al., EMNLP 2020), a normalizing flow that maps the vectors to a standard Gaussian.

The encoder stays frozen; an invertible map f is trained by maximum likelihood so that z = f(x) of the fit
vectors follows N(0, I), and ``transform`` returns z (BERT-flow's sentence embedding). The inputs are
standardised per dimension first. Two architectures:

* ``arch="glow"`` (the default, ``flow``): BERT-flow's own, the Glow of its default configuration
  ``config_l3_d3_w32``: 3 levels of 3 steps (actnorm, channel reversal, additive coupling with networks
  of width 32), the levels handing half their coordinates to the latent; see :mod:`iso_bench.methods.glow`.
  ``flow-permutation=invconv`` uses Glow's learned invertible 1 x 1 convolutions instead of the reversal.
* ``arch="affine"`` (``flow-arch=affine``): a single-level flow of ``n_blocks`` = 4 blocks of
  actnorm, an invertible linear layer W = P L (U + diag(sign * exp(log_s))) initialised from a random
  rotation, and an affine coupling whose MLP (one hidden layer of ``hidden`` = 128 units) outputs a
  log-scale (bounded by tanh to [-1, 1], for stability) and a shift for the second half of the
  coordinates, its last layer starting at zero.

Training, the same for both architectures, so that they differ by architecture alone: one epoch over the
fit corpus in batches of 64 vectors (BERT-flow: one epoch of 32 sentence pairs a step), Adam at a peak
learning rate of 1e-3 (BERT-flow's flow learning rate) with a linear warm-up over the first 10% of the
steps and a linear decay to 0, gradients clipped to norm 10 on the loss in nats per dimension, actnorms
initialised on up to 4,096 random fit vectors. BERT-flow's own optimiser differs in these details: a
constant learning rate, AdamW with weight decay 0.01, gradients clipped to norm 1 on a loss in bits per
dimension, actnorms initialised on its first batch of 32 sentences.

How training computes, none of which changes the math: torch (imported inside :meth:`Flow.fit` only),
float32, one intra-op CPU thread (a step's tensors are too small for more threads to do anything but
synchronise; the caller's thread count is restored), or the GPU that the :attr:`Flow.device` attribute
names (no parameter: it changes float rounding only); every trained tensor a view of one flat tensor,
which Adam and the gradient clipping update as one; the glow's gradient written out layer by layer
(:class:`iso_bench.methods.glow_trainer.Trainer`, checked against autograd by the tests), the affine flow's
through autograd. A step of the default on 64 384-d vectors costs about 3 ms of one CPU core (autograd
over the separate tensors: about 13 ms). The initialisation (random draws, data-dependent actnorms)
runs on the CPU whatever the device. The trained parameters are stored as float64 numpy arrays
(``blocks_``), and ``transform``/``inverse``/``log_likelihood`` run in numpy through the map that
training computed in torch (:func:`iso_bench.methods.glow.forward`, :class:`iso_bench.methods.flow_archs.Affine`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods import glow
from iso_bench.methods.base import Method, register
from iso_bench.methods.flow_archs import ARCHITECTURES as _ARCH
from iso_bench.methods.flow_archs import log_normal as _log_normal

ARCHS = ("glow", "affine")
_ARCH_PARAMS = {"glow": ("levels", "depth", "width", "permutation"), "affine": ("n_blocks", "hidden")}
"""The parameters that shape each architecture; the other architecture's must keep their defaults."""


@register
class Flow(Method):
    """A normalizing flow (BERT-flow's Glow, or arch=affine) trained to map the fit vectors to N(0, I).

    ``transform`` returns the latent z.

    Parameters:
        arch: ``"glow"`` (BERT-flow's architecture) or ``"affine"`` (one level of affine couplings).
        levels, depth, width: the Glow's levels, steps per level and coupling network width (BERT-flow:
            3, 3, 32). ``arch="glow"`` only.
        permutation: how a Glow step mixes the coordinates: ``"reverse"`` (BERT-flow) or ``"invconv"``
            (a learned invertible 1 x 1 convolution). ``arch="glow"`` only.
        n_blocks, hidden: the affine flow's blocks and its couplings' hidden width. ``arch="affine"`` only.
        steps: Adam steps. ``None`` (the default) trains one epoch over the fit corpus,
            ceil(n / batch_size) steps, as BERT-flow does (``num_train_epochs=1.0`` at 32 sentence
            pairs, i.e. 64 sentences, a step), at most ``max_steps``. ``steps=0`` is refused: it would
            score the data-dependent initialisation, an untrained flow.
        max_steps: the bound on the steps of an epoch-long fit, so that a large fit corpus costs a
            known amount (1,000 steps on 384-d vectors take about 3 s for glow, 35 s for affine, on one
            CPU core).
        batch_size: vectors per step (the whole corpus if smaller); batches are reshuffled each epoch.
        lr: peak Adam learning rate (1e-3 as in Glow and BERT-flow), reached after a linear warm-up
            over the first 10% of the steps, then decayed linearly to 0.
        seed: seeds the initialisation and the batch order; fitting is deterministic on CPU.

    Attribute ``device`` (:attr:`Method.device`, no part of the spec): where training runs, ``"cpu"`` (the
    default) or a CUDA device (``method.device = "cuda"``). The batches, their order and the learned float64
    numpy state are the same; the trained parameters differ by float rounding.

    Needs more vectors than dimensions (:meth:`min_vectors`) and enough dimensions for the architecture
    (:meth:`check`). Dimensions that are constant in the fit corpus (all-MiniLM-L6-v2 has such dead
    coordinates) hold no information: the flow models the others and maps the constant ones to 0
    (``constant_dims_``).

    Learned state: ``mean_``, ``scale_`` (standardisation), ``active_`` / ``constant_dims_`` (the
    modelled and the constant dimensions), ``blocks_`` (float64 numpy arrays: for ``glow`` a list of
    levels, each a list of step dicts; for ``affine`` a list of block dicts), ``history_`` (training loss
    per step: negative log-likelihood per dimension of the standardised batch), ``n_steps_`` (the steps
    trained), ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(500, 8)) @ np.random.default_rng(1).normal(size=(8, 8))
        >>> f = Flow(steps=50).fit(X)
        >>> float(np.abs(f.inverse(f.transform(X)) - X).max()) < 1e-8
        True
    """

    name = "flow"
    model_space = False  # its output is a latent space: a token-level flow is refused before a head (pool_replay)
    order = 60

    def __init__(
        self,
        *,
        arch: str = "glow",
        levels: int = 3,
        depth: int = 3,
        width: int = 32,
        permutation: str = "reverse",
        n_blocks: int = 4,
        hidden: int = 128,
        steps: int | None = None,
        max_steps: int = 1000,
        batch_size: int = 64,
        lr: float = 0.001,
        seed: int = 0,
    ) -> None:
        self.arch = arch
        self.levels = levels
        self.depth = depth
        self.width = width
        self.permutation = permutation
        self.n_blocks = n_blocks
        self.hidden = hidden
        self.steps = steps
        self.max_steps = max_steps
        self.batch_size = batch_size
        self.lr = lr
        self.seed = seed

    # ---- checks and fitting -----------------------------------------------------------------------
    def check(self, dim: int | None = None) -> None:
        """The counts (levels, depth, width, n_blocks, hidden, batch_size, max_steps) must be at least 1,
        steps at least 1 (or None; 0 steps would score an untrained flow), lr positive, arch and permutation
        known choices, and the parameters of the architecture not chosen left at their defaults. The input
        needs :meth:`min_dim` dimensions."""
        super().check(dim)
        counts = ("levels", "depth", "width", "n_blocks", "hidden", "batch_size", "max_steps")
        problems = [f"{key} must be at least 1, got {getattr(self, key)}" for key in counts
                    if int(getattr(self, key)) < 1]
        if self.steps is not None and self.steps < 1:
            problems.append(f"steps must be at least 1 (Adam steps; 0 would score the untrained flow; leave steps "
                            f"out for one epoch), got {self.steps}")
        if self.lr <= 0:
            problems.append(f"lr must be > 0, got {self.lr}")
        if self.arch not in ARCHS:
            problems.append(f"unknown arch {self.arch!r}; use one of {', '.join(ARCHS)}")
        if self.permutation not in glow.PERMUTATIONS:
            problems.append(f"unknown permutation {self.permutation!r}; use one of {', '.join(glow.PERMUTATIONS)}")
        defaults = self.param_defaults()
        for arch, keys in _ARCH_PARAMS.items():
            changed = [key for key in keys if arch != self.arch and getattr(self, key) != defaults[key]]
            if changed and self.arch in ARCHS:
                problems.append(f"{', '.join(changed)} belong{'s' if len(changed) == 1 else ''} to arch={arch}, "
                                f"not to arch={self.arch}")
        if dim is not None and not problems and dim < self.min_dim():
            problems.append(f"needs dim >= {self.min_dim()} ({self._why_min_dim()}), got {dim}-d vectors")
        if problems:
            self._refuse("; ".join(problems))

    def min_dim(self) -> int:
        """The fewest (varying) dimensions the architecture works on: a coupling splits the coordinates in
        two non-empty parts, so 2; a Glow of L levels halves them L - 1 times before its last level,
        so 2^(L - 1) + 1 (5 for BERT-flow's 3 levels)."""
        return glow.min_dim(self.levels) if self.arch == "glow" else 2

    def _why_min_dim(self) -> str:
        if self.arch == "glow" and self.levels > 1:
            times = "once" if self.levels == 2 else f"{self.levels - 1} times"
            return (f"{self.levels} levels halve the coordinates {times} and the last level's couplings split the "
                    "rest in two")
        return "the coupling splits the coordinates in two"

    def min_vectors(self, dim: int) -> int:
        """dim + 1: n vectors lie in an affine subspace of dimension at most n - 1, on which a density
        over all dim dimensions can grow without bound (a flow flexible enough to shrink the missing
        directions makes the likelihood unbounded), so maximum likelihood needs n > dim."""
        return dim + 1

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        return (f"a flow needs more vectors than dimensions: {n} vectors lie in an affine subspace of dimension "
                f"<= {max(n - 1, 0)}, where the likelihood is unbounded"), ""

    def fit(self, X: np.ndarray) -> Flow:
        return self._fit(X, self.steps)

    def _fit(self, X: np.ndarray, steps: int | None) -> Flow:
        """``fit`` with ``steps`` Adam steps (None: one epoch, at most ``max_steps``). The tests call it with
        ``steps=0`` for the data-dependent initialisation alone, the baseline training must improve on; a spec
        cannot ask for that (:meth:`check`)."""
        X = self._check_fit_input(X, float64=False)  # float32 stays float32: statistics are taken block by block
        n, d = X.shape
        mean, scale = _column_mean_std(X)
        const = scale <= 1e-12 * max(float(max(X.max(), -X.min())), 1e-300)  # |X|'s largest, with no copy of X
        active = np.flatnonzero(~const)
        if len(active) < self.min_dim():  # fewer vectors than varying dimensions cannot happen: n > d
            self._refuse(f"only {len(active)} of {d} dimensions vary in the fit corpus; {self.spec} needs at least "
                         f"{self.min_dim()} ({self._why_min_dim()})")
        steps = steps if steps is not None else min(-(-n // self.batch_size), self.max_steps)
        import torch  # lazily: torch takes seconds to import

        device = torch.device(self.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            device = torch.device("cpu")
        threads = torch.get_num_threads()
        try:
            if device.type == "cpu":
                torch.set_num_threads(1)  # tiny tensors: more threads only add synchronisation
            # the standardised vectors, computed in float64 and rounded to the float32 that training runs in
            standardised = np.empty((n, len(active)), np.float32)
            for i in range(0, n, _BLOCK):  # block by block: no float64 copy of a large fit corpus
                rows = X[i:i + _BLOCK].astype(np.float64)
                centred = (rows if len(active) == d else rows[:, active]) - mean[active]
                np.divide(centred, scale[active], out=standardised[i:i + _BLOCK], casting="same_kind")
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                blocks, history = _train(torch, standardised, self, steps, device)
        finally:
            torch.set_num_threads(threads)
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
        corpus carry no information and map to 0 (for ``glow`` the latent's coordinates are ordered by
        level, see :mod:`iso_bench.methods.glow`)."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        Z = np.zeros_like(X)
        Z[:, self.active_], _ = _ARCH[self.arch].forward(self.blocks_, self._standardise(X), np)
        return Z

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        """x = f^-1(z), float64, shape ``(n, dim)``: ``inverse(transform(X))`` recovers ``X`` (constant
        dimensions come back as their fit-corpus value)."""
        self._check_fitted()
        Z = self._check_input(Z, fitting=False)
        X = np.tile(self.mean_, (len(Z), 1))
        X[:, self.active_] += _ARCH[self.arch].inverse(self.blocks_, Z[:, self.active_]) * self.scale_[self.active_]
        return X

    def log_likelihood(self, X: np.ndarray) -> float:
        """Mean log-density of the vectors under the flow, in nats per vector (original coordinates of
        the dimensions that vary in the fit corpus)."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        z, logdet = _ARCH[self.arch].forward(self.blocks_, self._standardise(X), np)
        return float(np.mean(_log_normal(z) + logdet) - np.log(self.scale_[self.active_]).sum())

    def _standardise(self, X: np.ndarray) -> np.ndarray:
        a = self.active_
        return (X[:, a] - self.mean_[a]) / self.scale_[a]


_BLOCK = 8192  # rows converted to float64 at a time


def _column_mean_std(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the mean and standard deviation (ddof=0) of ``X`` in float64, bit for bit what
    ``X.astype(np.float64).mean(axis=0)`` and ``.std(axis=0)`` give for a C-ordered ``X`` (what the encoder
    hands a fit: numpy adds its rows one after another along axis 0, and so does this, each block's sum
    carrying the one before),
    with a block of ``_BLOCK`` rows in float64 at a time instead of two float64 copies of ``X``.

    >>> X = np.random.default_rng(0).normal(size=(20_000, 3)).astype(np.float32) * 7 + 100
    >>> mean, std = _column_mean_std(X)
    >>> bool((mean == X.astype(np.float64).mean(0)).all() and (std == X.astype(np.float64).std(0)).all())
    True
    """
    n = len(X)

    def column_sums(square_from: np.ndarray | None) -> np.ndarray:
        total = None
        for i in range(0, n, _BLOCK):
            block = X[i:i + _BLOCK].astype(np.float64)
            if square_from is not None:
                np.subtract(block, square_from, out=block)
                np.multiply(block, block, out=block)
            total = np.add.reduce(block if total is None else np.concatenate([total[None], block]), axis=0)
        return total

    mean = column_sums(None) / n
    return mean, np.sqrt(column_sums(mean) / n)


def _train(torch: Any, X: np.ndarray, cfg: Flow, steps: int, device: Any) -> tuple[Any, list[float]]:
    """Initialise the flow on the CPU (random draws and actnorms), then train it on ``device`` for ``steps``
    Adam steps on standardised ``X``; returns the float64 numpy parameters and the loss curve."""
    n, d = X.shape
    arch = _ARCH[cfg.arch]
    data = torch.as_tensor(X, dtype=torch.float32)
    params = arch.init(torch, d, cfg)
    # data-dependent ActNorm initialisation on a random subset of up to 4096 vectors
    arch.data_init(torch, params, data[torch.randperm(n)[:4096]])
    model = arch.trainer(torch, params, device)
    theta = model.theta  # every trained tensor, as one: the optimiser and the clipping update one tensor
    theta.grad = model.grad
    opt = torch.optim.Adam([theta], lr=cfg.lr, fused=True)
    # linear warm-up over the first 10% of the steps (Adam's first updates move every weight by ~lr at
    # once, which destabilises the d x d linear layers), then linear decay to 0 (the last steps average
    # out batch noise instead of jumping around the optimum)
    total, warm = max(steps, 1), max(steps // 10, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min((step + 1) / warm, 1.0 - step / total))
    bs = min(int(cfg.batch_size), n)
    data = data.to(device)
    losses = []
    perm, pos = torch.randperm(n).to(device), 0  # batch order from the CPU generator on every device
    for _ in range(steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n).to(device), 0
        batch = data.index_select(0, perm[pos : pos + bs])
        pos += bs
        losses.append(model.loss_and_grad(batch))  # the loss; its gradient in theta.grad
        # clip_grad_norm_(max_norm=10) written out for the one tensor (the library call costs 3 times more)
        theta.grad.mul_((10.0 / (torch.linalg.vector_norm(theta.grad) + 1e-6)).clamp_(max=1.0))
        opt.step()
        sched.step()
    history = torch.stack(losses).tolist() if losses else []
    with torch.no_grad():
        return model.to_numpy(), history
