"""Post-processing methods: each module defines one method and registers it with ``@register`` (``glow`` and
``glow_trainer`` hold the flow's Glow architecture and its training, ``flow_archs`` its two architectures; they
register nothing).

Importing this package imports every module in it (other than ``base``), so a new method is one new
file. Importing is cheap: torch and scikit-learn are imported inside ``fit`` of the methods that need
them. :func:`method_names` lists the methods in the order of the README's table (each class's ``order``).

Every ``transform`` returns a new float64 array of shape ``(n, d_out)`` (``d_out`` = the input
dimension, except ``whiten-k``: k). float64, not float32, because the guarantees the tests check
(projections on removed directions below 1e-8, whitened covariance equal to I within 1e-6) are
below float32 resolution; cast at the boundary (cache, mteb) where memory matters.

Example:
    >>> from iso_bench.methods import METHODS, make_method, method_names
    >>> "whiten" in METHODS, method_names()[0]
    (True, 'raw')
    >>> make_method("cluster-pca-10-3")[0].n_directions
    3
"""

from __future__ import annotations

import importlib
import pkgutil

from iso_bench.methods.base import (
    METHODS,
    Method,
    MethodError,
    NotFittedError,
    make_method,
    method_names,
    parse_spec,
    register,
)


def _discover() -> None:
    """Import every method module of this package; each registers its method on import."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_discover()

from iso_bench.methods.contract import check_method, method_checks  # noqa: E402 - after the methods it checks
from iso_bench.methods.naming import canonical_spec  # noqa: E402
from iso_bench.methods.stages import stage_pooled, storage_how, storage_of, storage_record, stored_scores  # noqa: E402

__all__ = ["METHODS", "Method", "MethodError", "NotFittedError", "canonical_spec", "check_method", "make_method",
           "method_checks", "method_names", "parse_spec", "register", "stage_pooled", "storage_how", "storage_of",
           "storage_record", "stored_scores"]
