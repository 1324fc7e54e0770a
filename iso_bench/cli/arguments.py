"""The argument types of the ``iso-bench`` command line, checked while parsing so that a typo fails before any
model loads: whole numbers, seconds, devices and method specs. Each raises ``argparse.ArgumentTypeError`` with
what is wrong; importing this module loads neither torch nor mteb (a device name imports torch when given)."""

from __future__ import annotations

import argparse

from iso_bench.checks import InputError, check_device
from iso_bench.methods import MethodError, make_method


def positive_int(text: str) -> int:
    """A whole number >= 1 (``--batch-size``, ``--top``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """A number of seconds >= 0 (``--worker-wait``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0 (0: no limit), got {text}")
    return value


def device_name(text: str) -> str:
    """A device this machine has (``cpu``, ``cuda``, ``cuda:N``, ``mps``); imports torch only when given."""
    try:
        return check_device(text) or text
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def method_spec(text: str) -> str:
    """A method spec that names a registered method with valid parameters, or a group of them (``default``,
    ``storage``: :data:`~iso_bench.results.benchmark.METHOD_GROUPS`), returned unchanged."""
    from iso_bench.results.benchmark import METHOD_GROUPS  # lazily: it reads the task cards

    if text in METHOD_GROUPS:
        return text

    try:
        make_method(text)
    except MethodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def expand_methods(specs: list[str]) -> list[str]:
    """``--methods`` with each group name replaced by its specs, each spec once, in order.

    >>> expand_methods(["raw", "storage"])[:3], len(expand_methods(["default", "storage", "raw"]))
    (['raw', 'raw-precision=int8', 'raw-precision=binary'], 43)
    """
    from iso_bench.results.benchmark import METHOD_GROUPS  # lazily: it reads the task cards

    return list(dict.fromkeys(s for spec in specs for s in METHOD_GROUPS.get(spec, (spec,))))
