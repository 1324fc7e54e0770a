"""Small vector helpers shared by the methods, the measures and the task kinds (numpy; the large products of
the fits and transforms go to a CUDA device through torch when one is given, :func:`matmul`).

Example:
    >>> import numpy as np
    >>> paired_cosine(np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 2.0], [2.0, 2.0]]))
    array([0., 1.])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

GPU_MIN_MACS = 1 << 24
"""Multiply-adds (rows x inner x columns) from which :func:`matmul` and :func:`gram` run on a CUDA device when
one is given. Below it (a few milliseconds of the CPU's float64 BLAS) the copies to and from the device cost
more than they save. The cut-off comes from the sizes involved, not from timings on a GPU."""


GPU_ROWS = 1 << 16
"""Rows of a product's left operand on the device at a time (65,536 float64 rows of 1,024 columns: 512 MiB), so
that a token-level fit of millions of vectors never needs them all in the GPU's memory at once."""


def gpu_device(device: Any) -> Any:
    """The torch device to compute on for ``device`` (a method's ``device``: ``"cpu"``, ``"cuda"``,
    ``"cuda:1"``): a CUDA device torch can use, else ``None`` (numpy on the CPU). torch is imported only for
    a CUDA device.

    >>> gpu_device("cpu") is None
    True
    """
    if device is None or not str(device).startswith("cuda"):
        return None
    import torch  # lazily: torch takes seconds to import

    return torch.device(str(device)) if torch.cuda.is_available() else None


def _to(dev: Any, X: np.ndarray) -> Any:
    """``X`` as a float64 tensor on ``dev``: copied in its own dtype (a float32 matrix crosses at half the
    bytes), converted there."""
    import torch  # lazily: torch takes seconds to import

    X = np.asarray(X)
    if any(stride < 0 for stride in X.strides):  # a reversed view: torch takes no negative strides
        X = np.ascontiguousarray(X)
    with warnings.catch_warnings():  # read-only cache matrices: the tensor is only read, never written
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.as_tensor(X).to(dev).to(torch.float64)


def matmul(A: np.ndarray, B: np.ndarray, device: Any = None) -> np.ndarray:
    """``A @ B`` as float64; on ``device`` (see :func:`gpu_device`) when it names a usable CUDA device and
    the product has at least :data:`GPU_MIN_MACS` multiply-adds, else numpy's ``A @ B`` on the CPU, bit for
    bit. The two agree up to float64 rounding (the order of the additions differs).

    >>> matmul(np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]]), "cpu")
    array([[11.]])
    """
    dev = gpu_device(device)
    if dev is None or A.shape[0] * A.shape[1] * B.shape[1] < GPU_MIN_MACS:
        return A @ B
    b = _to(dev, B)
    out = np.empty((A.shape[0], B.shape[1]))
    for i in range(0, len(A), GPU_ROWS):  # a block of rows on the device at a time, whatever A's size
        out[i:i + GPU_ROWS] = (_to(dev, A[i:i + GPU_ROWS]) @ b).cpu().numpy()
    return out


def gram(X: np.ndarray, device: Any = None) -> np.ndarray:
    """``X.T @ X`` as float64 (a scatter matrix of centred rows), on ``device`` as :func:`matmul` decides.

    >>> gram(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[10., 14.],
           [14., 20.]])
    """
    dev = gpu_device(device)
    if dev is None or X.shape[0] * X.shape[1] * X.shape[1] < GPU_MIN_MACS:
        return X.T @ X
    total = None
    for i in range(0, len(X), GPU_ROWS):  # summed block by block on the device
        t = _to(dev, X[i:i + GPU_ROWS])
        total = t.T @ t if total is None else total.add_(t.T @ t)
    return total.cpu().numpy()


def fix_signs(components: np.ndarray, axis: int = 0) -> np.ndarray:
    """Principal directions with reproducible signs: the largest-magnitude entry of each is positive.

    ``axis=0``: directions are rows (``(k, d)``, as scikit-learn's ``components_``); ``axis=1``: columns
    (``(d, k)``, as ``numpy.linalg.eigh`` returns them). An eigensolver may return ``v`` or ``-v``; fixing the
    sign makes every fit, and so every transform, the same on every machine.

    >>> fix_signs(np.array([[0.6, -0.8], [1.0, 0.0]]))
    array([[-0.6,  0.8],
           [ 1. ,  0. ]])
    """
    rows = np.asarray(components) if axis == 0 else np.asarray(components).T
    idx = np.abs(rows).argmax(axis=1)
    signs = np.sign(rows[np.arange(len(rows)), idx])
    signs[signs == 0] = 1.0
    fixed = rows * signs[:, None]
    return np.ascontiguousarray(fixed if axis == 0 else fixed.T)


def unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64; a zero row stays zero (its cosine with anything is 0)."""
    a = np.asarray(a, dtype=np.float64)
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norms, out=np.zeros(a.shape, dtype=np.float64), where=norms > 0)


def paired_cosine(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two aligned ``(n, d)`` arrays, shape ``(n,)``, in float64.

    A zero or non-finite row has no direction, so its cosine is undefined: that is an error naming the row,
    never a silent 0.
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape:
        raise ValueError(f"paired_cosine needs two (n, d) arrays of the same shape, got {A.shape} and {B.shape}")
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    for name, norms in (("A", na), ("B", nb)):
        bad = np.flatnonzero(~(norms > 0) | ~np.isfinite(norms))
        if bad.size:
            raise ValueError(f"row {int(bad[0])} of {name} has zero or non-finite norm; its cosine is undefined")
    return np.einsum("ij,ij->i", A, B) / (na * nb)


def segment_sums(X: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The sum of the rows of each segment of ``X`` (segment ``i``: rows ``starts[i]`` up to ``starts[i + 1]``,
    the last to the end), in X's dtype, shape ``(len(starts), X.shape[1])``. One sparse product (a 0/1 matrix
    of segments by rows): twenty times faster than ``np.add.reduceat`` along rows, which does not vectorise.

    >>> segment_sums(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([0, 2]))
    array([[4., 6.],
           [5., 6.]])
    """
    from scipy.sparse import csr_matrix  # lazily: scipy is slow to import

    n = len(X)
    bounds = np.append(np.asarray(starts, dtype=np.int64), n)
    ones = csr_matrix((np.ones(n, dtype=X.dtype), np.arange(n), bounds), shape=(len(bounds) - 1, n))
    return np.asarray(ones @ X)


class Moments:
    """The count, mean and (optionally) scatter matrix ``sum (x - mean)(x - mean)^T`` of vectors seen batch
    by batch, in float64, merged as Chan, Golub & LeVeque (1979) do: each batch's own mean and scatter, then
    the correction for the distance between the means. The result equals the statistics of all the vectors
    at once up to rounding (about 1e-14 relative), whatever the batches.

    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 3)) + 5
    >>> m = Moments(scatter=True); m.update(X[:30]); m.update(X[30:])
    >>> bool(np.allclose(m.mean, X.mean(0), rtol=1e-13)), bool(np.allclose(m.scatter, np.cov(X.T) * 99, rtol=1e-12))
    (True, True)
    """

    def __init__(self, scatter: bool = False, extremes: bool = False, device: Any = None) -> None:
        self.n, self.mean, self.scatter, self.m2 = 0, None, None, None  # m2: per dimension, sum (x - mean)^2
        self.argmin_counts = self.argmax_counts = None  # extremes: how often each dimension is a vector's min/max
        self._scatter, self._extremes = scatter, extremes
        self.device = device  # where each batch's scatter is computed (:func:`gram`)

    @property
    def std(self) -> np.ndarray:
        """Per dimension, the standard deviation (ddof=0, as ``X.std(axis=0)``)."""
        return np.sqrt(self.m2 / self.n)

    def update(self, X: np.ndarray) -> None:
        X = np.asarray(X, dtype=np.float64)
        n_b = len(X)
        if n_b == 0:
            return
        mean_b = X.mean(axis=0)
        Xc = X - mean_b
        m2_b = np.einsum("ij,ij->j", Xc, Xc)
        scatter_b = gram(Xc, self.device) if self._scatter else None
        if self._extremes:
            d = X.shape[1]
            lo, hi = np.bincount(X.argmin(axis=1), minlength=d), np.bincount(X.argmax(axis=1), minlength=d)
            if self.argmin_counts is None:
                self.argmin_counts, self.argmax_counts = lo, hi
            else:
                self.argmin_counts, self.argmax_counts = self.argmin_counts + lo, self.argmax_counts + hi
        if self.n == 0:
            self.n, self.mean, self.scatter, self.m2 = n_b, mean_b, scatter_b, m2_b
            return
        n_a, n = self.n, self.n + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / n)
        self.m2 = self.m2 + m2_b + delta**2 * (n_a * n_b / n)
        if self._scatter:
            self.scatter = self.scatter + scatter_b + np.outer(delta, delta) * (n_a * n_b / n)
        self.n = n


def row_blocks(lengths: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Consecutive texts ``[a, b)`` whose token vectors (``lengths`` rows each) make blocks of at most ``limit``
    rows (a text longer than that is a block of its own), so that a token-level transform holds one block's
    copies at a time. A block is never a single row where the texts have more: numpy multiplies one row by
    ``gemv``, whose additions run in another order than ``gemm``'s, and a block's rows must come out as they
    would in one product of all rows (a product's rows do not depend on which other rows it holds otherwise).

    >>> row_blocks([3, 2, 4, 1], 5), row_blocks([5, 1], 5), row_blocks([1], 5)
    ([(0, 2), (2, 4)], [(0, 2)], [(0, 1)])
    """
    blocks: list[tuple[int, int]] = []
    start, rows = 0, 0
    for i, n in enumerate(lengths):
        if rows and rows + n > limit:
            blocks.append((start, i))
            start, rows = i, 0
        rows += n
    if start < len(lengths):
        if rows < 2 and blocks:  # a last block of one row joins the one before it
            start = blocks.pop()[0]
        blocks.append((start, len(lengths)))
    return blocks
