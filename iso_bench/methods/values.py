"""How a parameter's value is written in a method's spec (the name of a variant and of its result folder)."""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_VALUE_CHARS = 40
"""The longest a parameter's value may be written out in a spec: the spec names the variant's result folder,
and a file name has at most 255 bytes (``whiten-eps=1e300`` is 301 digits positionally)."""


def format_value(value: Any) -> str:
    """A parameter's value as a spec writes it: positional decimals (never ``1e-05``: a ``-`` would split the
    spec), ``true``/``false``, lists joined by commas.

    >>> format_value(1e-5), format_value(True), format_value((1, 2)), format_value(256)
    ('0.00001', 'true', '1,2', '256')
    """
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return np.format_float_positional(value, trim="-")
    return str(value)
