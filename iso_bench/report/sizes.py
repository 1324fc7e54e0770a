"""The size of a variant's vectors (full or k dimensions; float32, int8 or binary), and the family of comparisons a
variant's difference from raw belongs to: its own size's, where raw at that size was run, else the full size's.

>>> size_of("whiten-256-precision=binary"), size_of("whiten-256-precision=binary").reference
(Size(dims=256, precision='binary'), 'truncate-256-precision=binary')
>>> size_of("whiten").label, size_of("raw-precision=int8").label, size_of("pca-64").label
('full', 'int8', '64-d')
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection

from iso_bench.methods import MethodError, make_method

_WIDE = 1 << 40  # an input width no cut reaches: what a method keeps of it tells a cut from the full width


@dataclasses.dataclass(frozen=True)
class Size:
    """How a variant's vectors are stored: ``dims`` (None: the model's full width) and ``precision``."""

    dims: int | None
    precision: str = "float32"

    @property
    def label(self) -> str:
        width = "full" if self.dims is None else f"{self.dims}-d"
        if self.precision == "float32":
            return width
        return self.precision if self.dims is None else f"{width} {self.precision}"

    @property
    def reference(self) -> str:
        """Raw at this size: raw's vectors cut to ``dims`` (``truncate-k``) and stored in ``precision``."""
        spec = "raw" if self.dims is None else f"truncate-{self.dims}"
        return spec if self.precision == "float32" else f"{spec}-precision={self.precision}"

    def order(self, dim: int = 1024) -> tuple[float, str]:
        """Largest first: the bytes of a ``dim``-d model's vector of this size."""
        width = dim if self.dims is None else self.dims
        return (-width * {"float32": 4, "int8": 1, "binary": 1 / 8}.get(self.precision, 4), self.label)


@functools.cache
def size_of(spec: str) -> Size | None:
    """The size of a variant's vectors from its spec; None for a spec this iso-bench cannot build."""
    try:
        method = make_method(spec)[0]
    except MethodError:
        return None
    kept = method.output_dim(_WIDE)
    return Size(None if kept == _WIDE else kept, getattr(method, "precision", None) or "float32")


FULL = "full"


def family(variant: str, present: Collection[str]) -> str:
    """The family of comparisons with raw that ``variant`` belongs to in a table whose variants are ``present``: the
    label of its size (``"int8"``, ``"128-d"``, ...) where raw at that size (:attr:`Size.reference`: raw cut and
    stored alike) is among them, so that the board per budget judges it against that raw; else :data:`FULL`. The
    verdict judges the :data:`FULL` family, and each family's p values are adjusted on their own. A board without
    raw at any other size (iso-bench v1 and v2: whiten-256 beside no truncate-256) is one family.

    >>> family("whiten-256", {"raw", "whiten-256"}), family("whiten-256", {"raw", "whiten-256", "truncate-256"})
    ('full', '256-d')
    >>> family("truncate-256", {"raw", "truncate-256"}), family("raw-precision=int8", {"raw", "raw-precision=int8"})
    ('256-d', 'int8')
    """
    size = size_of(variant)
    return size.label if size is not None and size != Size(None) and size.reference in present else FULL


def size_order(label: str) -> tuple[float, str]:
    """Where a size, by its :attr:`Size.label` (``"full"``, ``"int8"``, ``"128-d"``, ``"64-d binary"``), comes among
    sizes: largest first (:meth:`Size.order`).

    >>> sorted(["binary", "64-d", "int8", "128-d binary", "full"], key=size_order)
    ['full', 'int8', '64-d', 'binary', '128-d binary']
    """
    first, *rest = label.split()
    if first in ("int8", "binary"):
        return Size(None, first).order()
    return Size(None if first == FULL else int(first.removesuffix("-d")), rest[0] if rest else "float32").order()
