from __future__ import annotations

import pytest

from iso_bench.kinds.cards import cards, expand_tasks, suites
from iso_bench.registry import IsoBenchError, Registry, UnknownNameError, did_you_mean


def test_duplicate_name_is_an_error() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("alpha", 1)
    with pytest.raises(ValueError, match="thing 'alpha' is already registered"):
        reg.add("alpha", 2)


def test_unknown_name_suggests_close_matches() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("whiten", 1)
    reg.add("center", 2)
    with pytest.raises(UnknownNameError, match="unknown thing 'whitten'. Did you mean 'whiten'") as info:
        reg.get("whitten")
    assert str(info.value) == "unknown thing 'whitten'. Did you mean 'whiten'? Known: center, whiten."
    # a user-facing error (printed without a traceback) that still reads as a KeyError to old callers
    assert isinstance(info.value, IsoBenchError) and isinstance(info.value, KeyError)


def test_did_you_mean() -> None:
    assert did_you_mean("whitten", ["whiten", "center"]) == " Did you mean 'whiten'?"
    assert did_you_mean("STS1", ["STS22", "STS12", "WiC"]) == " Did you mean 'STS12' or 'STS22'?"  # best first
    assert did_you_mean("zzz", ["whiten", "center"]) == ""
    assert did_you_mean("anything", []) == ""


def test_user_errors_share_one_base() -> None:
    from iso_bench.backbones.base import BackboneError
    from iso_bench.backbones.hf_backbone import Extraction, ExtractionError
    from iso_bench.methods import MethodError, NotFittedError, make_method
    from iso_bench.vectors.store import CacheCorruptError

    for cls in (BackboneError, ExtractionError, CacheCorruptError, MethodError, NotFittedError, UnknownNameError):
        assert issubclass(cls, IsoBenchError), cls
    assert issubclass(MethodError, ValueError)  # callers that caught ValueError still do
    with pytest.raises(MethodError, match="unknown method 'whitten'. Did you mean 'whiten'"):
        make_method("whitten")
    with pytest.raises(ExtractionError, match="unknown pooling 'max'"):
        Extraction(pooling="max")


MTEB_STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")


def test_suites_expand_without_repeats() -> None:
    assert suites()["mteb-sts"] == MTEB_STS
    assert expand_tasks(["STSBenchmark", "mteb-sts"]) == [
        "STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"]


def test_every_task_is_in_all_and_in_its_suite() -> None:
    groups = suites()
    assert list(groups["all"]) == [card.name for card in cards()]
    for card in cards():
        assert card.name in groups[card.suite]
    assert expand_tasks(["isotropy"]) == list(groups["isotropy"]) and groups["isotropy"]
