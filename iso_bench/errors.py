"""The errors that mean "bad input": the CLI prints their message without a traceback."""

from __future__ import annotations

from iso_bench.backbone import BackboneError
from iso_bench.cache import CacheCorruptError
from iso_bench.data import DataNotFoundError
from iso_bench.methods.base import MethodError
from iso_bench.registry import UnknownNameError

USER_ERRORS: tuple[type[BaseException], ...] = (
    BackboneError,
    CacheCorruptError,
    DataNotFoundError,
    MethodError,
    UnknownNameError,
    FileNotFoundError,
)
