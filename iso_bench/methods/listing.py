"""What ``iso-bench list`` says of the methods: each one's name, the first line of its docstring as plain text,
where it is fitted and applied, its parameters, and whether a run without ``--methods`` runs it.

>>> plain_doc("Sets ``n_components`` (see :class:`Whiten`, :func:`fit`).")
'Sets n_components (see Whiten, fit).'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from iso_bench.methods.base import METHODS, STAGES, make_method, method_names

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")  # :class:`x`, :func:`~a.b`
_LITERAL = re.compile(r"``([^`]+)``")


def plain_doc(text: str) -> str:
    """reStructuredText markup of a docstring line as plain text: roles and literals as their words."""
    text = _ROLE.sub(lambda m: m.group(1).rpartition(".")[2] if "`~" in m.group(0) else m.group(1), text)
    return _LITERAL.sub(r"\1", text)


def describe_methods(defaults: Sequence[str], storage: Sequence[str] = ()) -> str:
    """The methods, in the README's order, each marked ``*`` when one of ``defaults`` (the specs a run without
    ``--methods`` runs) is of it; then the storage stages every spec takes, those specs, and the ``storage`` group's
    (the benchmark's bytes axis) where given."""
    default_names = {make_method(spec)[0].name for spec in defaults}
    lines = ["methods (--methods takes specs: name[-positional...][-key=value...]; * = run by default):"]
    for name in method_names():
        cls = METHODS.get(name)
        doc = plain_doc((cls.__doc__ or "").strip().splitlines()[0]) if cls.__doc__ else ""
        params = ", ".join(f"{k}={v}" for k, v in cls.param_defaults().items()) or "no parameters"
        positional = f" positional: {', '.join(cls.spec_args)};" if cls.spec_args else ""
        mark = " *" if name in default_names else ""
        lines += [f"  {name + mark:<16} {doc}", f"  {'':<16} level={cls.default_level};{positional} {params}"]
    lines.append(f"storage stages, after any spec: {', '.join(f'-precision={p}' for p in STAGES)} "
                 "(whiten-256-precision=binary; a token-level spec's int8 ranges: its pooled fit vectors)")
    lines.append(f"default methods (a run without --methods; --methods default): {' '.join(defaults)}")
    if storage:
        lines.append(f"storage methods (--methods storage; with default, the benchmark's every method): "
                     f"{' '.join(storage)}")
    return "\n".join(lines)


__all__ = ["describe_methods", "plain_doc"]
