"""Post-processing methods: each module defines one method and registers it with ``@register``.

Importing this package registers every built-in method (cheaply: torch and scikit-learn are
imported inside ``fit`` of the methods that need them).

Every ``transform`` returns a new float64 array of shape ``(n, d_out)`` (``d_out`` = the input
dimension, except ``whiten-k``: k). float64, not float32, because the guarantees the tests check
(projections on removed directions below 1e-8, whitened covariance equal to I within 1e-6) are
below float32 resolution; cast at the boundary (cache, mteb) where memory matters.

Example:
    >>> from iso_bench.methods import METHODS, make_method
    >>> "whiten" in METHODS
    True
    >>> make_method("cluster-pca-10-3")[0].n_directions
    3
"""

# table order of REFERENCE.md: the registry keeps insertion order, and listings follow it
from iso_bench.methods import raw, center, clip, abtt, whiten, cluster_pca, flow  # noqa: F401, I001
from iso_bench.methods.base import METHODS, Method, MethodError, NotFittedError, make_method, parse_spec, register

__all__ = ["METHODS", "Method", "MethodError", "NotFittedError", "make_method", "parse_spec", "register"]
