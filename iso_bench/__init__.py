"""iso-bench: which isotropy post-processing makes an encoder's embeddings better, on which tasks, and
by how much, measured with the MTEB harness.

Importing the package is cheap: torch, transformers and mteb load only when used. Once mteb's model
registry is imported, every variant of the known models is registered with it, so that
``mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten")`` works after ``import iso_bench``.

Importing it also pins the kernels of torch, MKL, oneDNN and OpenBLAS to the AVX2 level, so that the numbers are
the same bits on any x86-64 CPU of the last decade (:mod:`iso_bench.kernels`): import it before torch and numpy
compute anything, or set ``ISO_BENCH_KERNELS=native`` for each library's own, sometimes faster, kernels.
"""

from __future__ import annotations

import contextlib

from iso_bench import _hooks
from iso_bench._version import __version__
from iso_bench.kernels import KernelError, pin_kernels

_hooks.install()
with contextlib.suppress(KernelError):  # a bad $ISO_BENCH_KERNELS: reported by the run that reads it
    pin_kernels()

__all__ = ["__version__", "pin_kernels"]
