"""The errors that mean "bad input": the CLI prints their message without a traceback."""

from __future__ import annotations

from iso_bench.backbone import BackboneError
from iso_bench.cache import CacheCorruptError
from iso_bench.data import DataNotFoundError, FitCorpusError
from iso_bench.methods.base import MethodError
from iso_bench.registry import UnknownNameError
from iso_bench.senteval import STSFormatError
from iso_bench.wic import WiCFormatError
from iso_bench.wsd_data import WSDDataError

USER_ERRORS: tuple[type[BaseException], ...] = (
    BackboneError,
    CacheCorruptError,
    DataNotFoundError,
    FitCorpusError,
    MethodError,
    UnknownNameError,
    FileNotFoundError,
    STSFormatError,
    WiCFormatError,
    WSDDataError,
)
