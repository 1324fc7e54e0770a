"""Task kinds: one module (or, for a large kind, one package) per kind, holding its evaluator, its data
readers and its scorer. A card in ``tasks/`` names its kind; :func:`kind_class` finds the evaluator.

Kinds import neither torch nor mteb; :mod:`iso_bench.mteb_plugin` turns each card into an mteb task class.
"""

from __future__ import annotations

import importlib

from iso_bench.kinds.base import Kind
from iso_bench.kinds.cards import CardError, TaskCard


def kind_class(card: TaskCard) -> type[Kind]:
    """The evaluator class of a card's kind: the ``KIND`` of module ``card.kind_module()``."""
    module_name = card.kind_module()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise CardError(f"{card.module}: task {card.name!r} names kind {card.kind!r}, but there is no module "
                            f"{module_name}; kinds live in iso_bench/kinds/ (or give a dotted module path)") from None
        raise
    kind = getattr(module, "KIND", None)
    if not (isinstance(kind, type) and issubclass(kind, Kind)):
        raise CardError(f"{module_name} (kind of task {card.name!r}) must define KIND, a subclass of "
                        "iso_bench.kinds.base.Kind")
    return kind


__all__ = ["Kind", "kind_class"]
