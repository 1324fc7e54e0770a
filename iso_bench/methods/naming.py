"""How a variant is named: the canonical spec of a method (the name results and registered models carry)."""

from __future__ import annotations

from iso_bench.methods.base import make_method


def canonical_spec(spec: str) -> str:
    """The spec a variant is named by: the method's own spec (parameters that differ from the defaults, in a
    fixed order), with ``-level=...`` when the level is not the method's default. A run's seed is not part of
    it (it is part of the setup); a seed the spec itself sets stays in it.

    >>> canonical_spec("whiten-n_components=256"), canonical_spec("center-level=token")
    ('whiten-256', 'center-level=token')
    """
    method, level = make_method(spec)
    return method.spec + (f"-level={level}" if level != type(method).default_level else "")
