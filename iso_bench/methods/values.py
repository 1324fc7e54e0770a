"""How a parameter's value is written in a method's spec (the name of a variant and of its result folder), and how
it is read back from one."""

from __future__ import annotations

import typing
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


def param_kinds(cls: type) -> dict[str, type]:
    """The non-None type of each annotated ``__init__`` parameter (``int | None`` -> ``int``)."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable annotations: fall back to guessing from the text
        return {}
    kinds = {}
    for key, hint in hints.items():
        args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        origin = typing.get_origin(args[0]) or args[0]
        if isinstance(origin, type):
            kinds[key] = origin
    return kinds


def parse_value(text: str, default: Any, kind: type | None = None) -> Any:
    """A parameter's value as written in a spec, of the type of its ``default`` (or its annotation ``kind`` where the
    default is None); raises ValueError where ``text`` is not one.

    >>> parse_value("256", None, int), parse_value("3,5", ()), parse_value("no", True)
    (256, (3, 5), False)
    """
    if isinstance(default, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(text)
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, (tuple, list)):
        return tuple(int(v) for v in text.split(",") if v)
    if default is None and kind is not None:
        # the annotation says what an optional parameter holds: "int | None", "tuple[int, ...] | None"
        if kind in (tuple, list):
            return tuple(int(v) for v in text.split(",") if v)
        if kind in (int, float):
            return kind(text)
        return text
    if default is None:
        # no usable annotation: "256" -> 256 (whiten-256), "0.1" -> 0.1, "3,5" -> (3, 5), else a string
        if "," in text:
            return tuple(int(v) for v in text.split(",") if v)
        for number in (int, float):
            try:
                return number(text)
            except ValueError:
                pass
    return text
