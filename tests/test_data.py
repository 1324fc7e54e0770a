"""Data sources: the mirror is used when it holds the repository; otherwise one error names both places."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from iso_bench.data.sources import DataNotFoundError, mirror_dir, resolve_source, use_source


class FakeTask:
    def __init__(self, path: str, fail: Exception | None = None) -> None:
        self.metadata = SimpleNamespace(dataset={"path": path, "revision": "abc123"}, model_copy=self._copy)
        self.data_loaded = False
        self.fail = fail
        self.loaded_from: str | None = None

    def _copy(self, update):
        return SimpleNamespace(**{**vars(self.metadata), **update})

    def load_data(self) -> None:
        if self.fail:
            raise self.fail
        self.loaded_from = self.metadata.dataset["path"]
        self.data_loaded = True


def test_mirror_is_used_and_checksummed(tmp_path: Path) -> None:
    (tmp_path / "org" / "ds").mkdir(parents=True)
    (tmp_path / "org" / "ds" / "test.jsonl").write_text('{"a": 1}\n')
    task = FakeTask("org/ds")
    source = use_source(task, tmp_path)
    assert source["source"] == "mirror" and task.loaded_from == str((tmp_path / "org" / "ds").resolve())
    first = source["sha256"]
    (tmp_path / "org" / "ds2").mkdir()
    (tmp_path / "org" / "ds2" / "test.jsonl").write_text('{"a": 2}\n')
    assert resolve_source("org/ds2", None, tmp_path).checksum != first


def test_mirror_may_hold_the_repositories_under_hub(tmp_path: Path) -> None:
    (tmp_path / "hub" / "org" / "ds").mkdir(parents=True)
    source = resolve_source("org/ds", None, tmp_path)
    assert source.kind == "mirror" and source.path == str((tmp_path / "hub" / "org" / "ds").resolve())


def test_missing_everywhere_names_both_places(tmp_path: Path) -> None:
    task = FakeTask("org/absent", fail=ConnectionError("offline"))
    with pytest.raises(DataNotFoundError) as err:
        use_source(task, tmp_path)
    msg = str(err.value)
    assert str(tmp_path / "org" / "absent") in msg and "Hugging Face hub" in msg and "datasets/org/absent@abc123" in msg


def test_hub_is_the_default_without_mirror(monkeypatch) -> None:
    monkeypatch.delenv("ISO_BENCH_DATA_DIR", raising=False)
    assert resolve_source("org/ds", "r", None).kind == "hub"
    assert mirror_dir(None) is None


def test_nonexistent_mirror_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="does not exist"):
        mirror_dir(tmp_path / "nope")
