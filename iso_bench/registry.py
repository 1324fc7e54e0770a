"""One generic name -> object registry, used for methods, tasks and suites.

A duplicate name is an error; an unknown name answers with the closest known names.

Example:
    >>> reg = Registry("widget")
    >>> @reg.register("spoke")
    ... class Spoke: ...
    >>> reg.get("spoke") is Spoke
    True
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised for a name that is not registered; the message suggests close matches."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection of objects of one kind ("method", "task", ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; a name can be registered once."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def deco(obj: T) -> T:
            return self.add(name, obj)

        return deco

    def get(self, name: str) -> T:
        """The object registered as ``name``, or an :class:`UnknownNameError` naming close matches."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Known: {', '.join(sorted(self._items))}."

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
