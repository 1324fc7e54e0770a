"""The same export made twice from the same inputs is the same bytes (the fourth fault drill): the first encodes
its texts, the second reads them from the cache, and neither the tokenizer's truncation (state an encode leaves on
the live tokenizer), the key order of iso_bench_transform.json nor the entry order of an .npz may tell them apart;
so their manifests are equal too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.files import read_manifest
from tests.conftest import MINILM

pytestmark = pytest.mark.slow
CORPUS = ["a man is playing a guitar", "a woman is slicing a cucumber", "the cat sat on the mat",
          "a dog runs in the park", "two men are playing chess", "the river bank was flooded"]


@pytest.mark.parametrize("spec", ["zscore", "center-level=token"])  # Dense modules; the iso-bench module
def test_an_export_made_twice_is_byte_identical(tmp_path: Path, spec: str) -> None:
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    env = {**os.environ, "ISO_BENCH_CACHE": str(tmp_path / "cache")}  # empty: the first export encodes
    for kept in ("first", "second"):  # the same -o each time (the folder's name is in its README and record)
        done = subprocess.run([sys.executable, "-m", "iso_bench.cli", "export", f"{MINILM}+{spec}", "--fit-corpus",
                               "corpus.txt", "-o", "out", "--no-progress"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        (tmp_path / "out").rename(tmp_path / kept)
    first, second = read_manifest(tmp_path / "first"), read_manifest(tmp_path / "second")
    assert first is not None and "tokenizer.json" in first and "iso_bench_transform.npz" in first
    differ = sorted(name for name in first if first[name] != second.get(name))
    assert differ == [] and first == second
    for name in first:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes(), name
