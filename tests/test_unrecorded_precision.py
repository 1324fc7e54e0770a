"""Vectors and results filed under the name that means float32 but made by a 16-bit forward pass (written before
iso-bench recorded precision) are never served to a float32 request: the cache namespace is set aside and its
vectors encoded again, a result is refused in one line. The model is a random GPT-2 (tests/decoder_helpers.py)
saved with bfloat16 weights and config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from iso_bench.backbones.hf_backbone import Backbone, Extraction
from iso_bench.cli import main
from iso_bench.vectors.store import EmbeddingStore
from tests.conftest import small_mirror
from tests.decoder_helpers import make_decoder

TEXTS = ["A man is playing a guitar.", "It rained.", "Two dogs run through the snow.", "A plane is taking off."]


@pytest.fixture(scope="module")
def bf16_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModel

    folder = make_decoder(tmp_path_factory.mktemp("gpt2-f32"))
    half = tmp_path_factory.mktemp("gpt2-bf16")
    AutoModel.from_pretrained(folder, dtype=torch.bfloat16).save_pretrained(half)
    for name in folder.iterdir():
        if name.name.startswith(("tokenizer", "vocab", "merges", "special")):
            (half / name.name).write_bytes(name.read_bytes())
    assert json.loads((half / "config.json").read_text())["dtype"] == "bfloat16"
    return half


def before_precision_was_recorded(folder: Path) -> Backbone:
    """The backbone of iso-bench before ``--dtype``: the checkpoint loaded in its own bfloat16 (transformers 5), its
    extraction and record without a dtype (the name that now means float32)."""
    half = Backbone(str(folder), device="cpu", extraction=Extraction(pooling="last-token", dtype="bfloat16"))
    old = half.with_extraction(Extraction(pooling="last-token"))
    record = old.describe()
    record["extraction"].pop("precision", None)
    old.describe = lambda: record  # type: ignore[method-assign]
    return old


def test_a_namespace_of_unrecorded_precision_is_set_aside_and_encoded_again(bf16_dir: Path, tmp_path: Path) -> None:
    old = before_precision_was_recorded(bf16_dir)
    cached = EmbeddingStore(old, tmp_path, progress=False).sentences(TEXTS)
    full = Backbone(str(bf16_dir), device="cpu", extraction=Extraction(pooling="last-token"))
    assert full.model.dtype == torch.float32 and full.extraction.key() == old.extraction.key()
    fresh = full.encode(TEXTS, progress=False)["sentence"]
    assert np.abs(np.stack(fresh) - cached).max() > 1e-3  # bfloat16's vectors are other numbers
    store = EmbeddingStore(full, tmp_path, progress=False)
    np.testing.assert_array_equal(store.sentences(TEXTS), np.stack(fresh))
    assert store.stats == {"computed": len(TEXTS), "reused": 0}
    aside = store.folder.with_name(f"{store.folder.name}.bfloat16-unrecorded")
    assert (aside / "meta.json").is_file() and json.loads((store.folder / "meta.json").read_text())[
        "extraction"]["precision"] == "float32"
    again = EmbeddingStore(full, tmp_path, progress=False)  # a namespace that records float32 is reused
    np.testing.assert_array_equal(again.sentences(TEXTS), np.stack(fresh))
    assert again.stats["reused"] == len(TEXTS) and again.folder == store.folder


def test_16_bit_shards_in_a_float32_namespace_are_never_read(bf16_dir: Path, tmp_path: Path) -> None:
    old = before_precision_was_recorded(bf16_dir)
    writer = EmbeddingStore(old, tmp_path, progress=False)
    writer.storage = "bfloat16"  # the index says bfloat16, the meta.json nothing
    writer.sentences(TEXTS)
    meta = writer.folder / "meta.json"
    record = json.loads(meta.read_text())
    record["extraction"]["precision"] = "float32"  # even a record that says float32 does not outweigh the index
    meta.write_text(json.dumps(record))
    store = EmbeddingStore(Backbone(str(bf16_dir), device="cpu", extraction=Extraction(pooling="last-token")),
                           tmp_path, progress=False)
    store.sentences(TEXTS)
    assert store.stats == {"computed": len(TEXTS), "reused": 0}


def test_a_result_of_unrecorded_precision_is_refused_in_one_line(bf16_dir: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    mirror = small_mirror(tmp_path / "mirror", ["sts12-sts"], 40)

    def run(*extra: str) -> int:
        return main(["run", "--model", str(bf16_dir), "--pooling", "last-token", "--dtype", "float32", "--methods",
                     "raw", "--tasks", "STS12", "--data-dir", str(mirror), "--results", str(tmp_path / "res"),
                     "--cache-dir", str(tmp_path / "cache"), "--no-progress", *extra])

    assert run() == 0
    [result] = (tmp_path / "res").rglob("STS12.json")
    written = result.stat().st_mtime_ns
    assert run() == 0 and result.stat().st_mtime_ns == written  # present, recorded as float32: not computed again
    content = json.loads(result.read_text())
    for entries in content["scores"].values():
        for entry in entries:
            entry["iso_bench"]["extraction"].pop("precision", None)
    result.write_text(json.dumps(content))  # as written before precision was recorded
    capsys.readouterr()
    assert run() != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "may hold bfloat16 numbers" in line]
    assert len(lines) == 1 and "STS12" in lines[0] and "--overwrite" in lines[0]
    assert run("--overwrite") == 0
    assert all(e["iso_bench"]["extraction"]["precision"] == "float32"
               for entries in json.loads(result.read_text())["scores"].values() for e in entries)
