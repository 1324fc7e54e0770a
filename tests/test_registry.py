from __future__ import annotations

import pytest

from iso_bench.registry import Registry, UnknownNameError
from iso_bench.suites import SUITES, expand_tasks


def test_duplicate_name_is_an_error() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("alpha", 1)
    with pytest.raises(ValueError, match="thing 'alpha' is already registered"):
        reg.add("alpha", 2)


def test_unknown_name_suggests_close_matches() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("whiten", 1)
    reg.add("center", 2)
    with pytest.raises(UnknownNameError, match="unknown thing 'whitten'. Did you mean 'whiten'"):
        reg.get("whitten")


def test_suites_expand_without_repeats() -> None:
    assert expand_tasks(["STSBenchmark", "mteb-sts"]) == [
        "STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"]
    assert len(SUITES.get("mteb-sts")) == 7
