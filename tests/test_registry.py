from __future__ import annotations

import pytest

from iso_bench.registry import Registry, UnknownNameError
from iso_bench.suites import MTEB_STS, expand_tasks, suites


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
    assert len(MTEB_STS) == 7


def test_every_task_is_in_all_and_in_its_suite() -> None:
    from iso_bench.kinds import TASKS

    groups = suites()
    assert set(groups["all"]) == set(MTEB_STS) | set(TASKS)
    for name in TASKS:
        assert name in groups[TASKS.get(name).suite]
    assert expand_tasks(["isotropy"]) == list(groups["isotropy"]) and groups["isotropy"]
