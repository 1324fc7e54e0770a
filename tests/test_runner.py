"""Run-level logging: a message repeated by every per-task fit is shown once per run."""

from __future__ import annotations

import logging

import pytest

from iso_bench.runner import _Once


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("iso_bench.methods.whiten", logging.WARNING, __file__, 1, msg, args, None)


def test_each_distinct_message_passes_once() -> None:
    once = _Once()
    text = "method %r: %d of %d directions have no variance and are dropped"
    assert once.filter(_record(text, "whiten", 3, 384))
    assert not once.filter(_record(text, "whiten", 3, 384))  # the next task's fit says the same
    assert once.filter(_record(text, "whiten-256", 3, 384))  # another method: shown


def test_the_filter_is_attached_to_the_method_loggers_only_during_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import iso_bench.runner as runner

    seen = {}

    def fake_run(cfg):
        seen["filters"] = list(logging.getLogger("iso_bench.methods.whiten").filters)
        return "done"

    monkeypatch.setattr(runner, "_run", fake_run)
    assert runner.run(runner.RunConfig()) == "done"
    assert any(isinstance(f, _Once) for f in seen["filters"])
    assert not any(isinstance(f, _Once) for f in logging.getLogger("iso_bench.methods.whiten").filters)
