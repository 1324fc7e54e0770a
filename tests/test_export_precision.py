"""An export of a 16-bit pipeline: sentence-transformers loads every module after the first in the first's dtype,
so the Dense modules of the folder run in the base model's 16 bits; the fit record and the model card say so (the
precision the folder computes the transform in, never left unsaid). all-MiniLM-L6-v2 saved in bfloat16 here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MINILM

pytestmark = pytest.mark.slow
TEXTS = ["a man is playing a guitar", "a woman is slicing a cucumber", "the cat sat on the mat",
         "a dog runs in the park", "two men are playing chess", "the river bank was flooded",
         "she deposited money at the bank", "a girl is combing her hair", "a boy plays the piano"]


def test_a_16_bit_pipelines_dense_modules_are_recorded_in_the_precision_they_run_in(tmp_path: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from iso_bench.cli import main

    half = tmp_path / "minilm-bf16"
    SentenceTransformer(MINILM, device="cpu").to(torch.bfloat16).save(str(half))
    assert json.loads((half / "config.json").read_text())["dtype"] == "bfloat16"
    (tmp_path / "corpus.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["export", f"{half}+zscore", "--fit-corpus", str(tmp_path / "corpus.txt"), "-o", str(out),
                 "--cache-dir", str(tmp_path / "cache"), "--no-progress"]) == 0
    how = json.loads((out / "iso_bench_transform.json").read_text())["export"]
    assert how["as"] == "dense" and how["dtype"] == "bfloat16"
    assert "Its Dense modules run in bfloat16" in (out / "README.md").read_text()
    loaded = SentenceTransformer(str(out), device="cpu")
    dense = [m for m in loaded if type(m).__name__ == "Dense"]
    assert len(dense) == 2 and {p.dtype for m in dense for p in m.parameters()} == {torch.bfloat16}  # as recorded
    # the folder's vectors are the recorded map of the base's to within bfloat16 rounding (2**-8 relative)
    with np.load(out / "iso_bench_transform.npz") as npz:
        offset, matrix = npz["offset"], npz["matrix"]
    base = SentenceTransformer(str(half), device="cpu").encode(TEXTS, convert_to_numpy=False)
    raw = torch.stack(base).float().numpy()
    got = loaded.encode(TEXTS, convert_to_tensor=True).float().numpy()
    want = (raw - offset) @ matrix
    error = np.abs(got - want).max() / np.abs(want).max()
    print(f"bfloat16 Dense modules: max error / max value {error:.2e}")
    assert 0 < error < 2 ** -6


def test_an_export_of_a_float32_pipeline_records_no_dtype(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from iso_bench.export.build import dense_precision

    assert dense_precision(SentenceTransformer(MINILM, device="cpu")) == {}
