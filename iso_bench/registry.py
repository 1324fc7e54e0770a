"""One generic name -> object registry (methods, task cards, suites), and the error base of iso-bench.

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
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class IsoBenchError(Exception):
    """Base of every error that means bad input (a name, a file, a parameter, a data folder).

    The message names the input and says what to do; the command line prints it without a traceback.
    Every other exception is a bug and keeps its traceback.
    """


class UnknownNameError(IsoBenchError, KeyError):
    """Raised for a name that is not registered; the message suggests close matches."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.5) -> str:
    """`` Did you mean 'a' or 'b'?`` for the known names close to ``name``, else ``""``.

    >>> did_you_mean("whitten", ["whiten", "center"])
    " Did you mean 'whiten'?"
    """
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=cutoff)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


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
        known = ", ".join(sorted(self._items))
        return f"unknown {self.kind} {name!r}.{did_you_mean(name, self._items)} Known: {known}."

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
