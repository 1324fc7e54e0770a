"""A decoder's own hidden states: last-token pooling (hand-computed, with and without padding), the precision an
extraction runs in (chosen, recorded, keying cache and setup), and the outlier analysis on a decoder. The decoder is
a random GPT-2 made in the test (tests/decoder_helpers.py), whose tokenizer has no pad token."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from iso_bench.backbones.base import PADDED
from iso_bench.backbones.hf_backbone import Backbone, Extraction, _padder, default_extraction
from iso_bench.backbones.loader import load_backbone, run_dtype
from iso_bench.backbones.precision import checkpoint_dtype
from iso_bench.cli import main
from iso_bench.grid.plan import RunConfig, variant_meta_of
from iso_bench.numerics.outliers import analyse
from iso_bench.vectors.store import EmbeddingStore
from tests.decoder_helpers import SENTENCES, make_decoder

TEXTS = ["A man is playing a guitar.", "It rained.", "Two dogs run through the snow.", "A plane is taking off."]


@pytest.fixture(scope="module")
def decoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_decoder(tmp_path_factory.mktemp("gpt2tiny"))


@pytest.fixture(scope="module")
def decoder(decoder_dir: Path) -> Backbone:
    return Backbone(str(decoder_dir), device="cpu", extraction=Extraction(pooling="last-token"))


def alone(backbone: Backbone, text: str, layer: int = -1) -> np.ndarray:
    """The hidden state of ``text``'s last token, the text run alone (no padding, no other text)."""
    enc = backbone.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return backbone.model(**enc, output_hidden_states=True).hidden_states[layer][0, -1].float().numpy()


def test_last_token_equals_the_last_hidden_state_of_each_text_alone(decoder: Backbone) -> None:
    assert decoder.tokenizer.pad_token is None and decoder.decoder
    got = decoder.encode(TEXTS, progress=False)["sentence"]
    for text, vector in zip(TEXTS, got, strict=True):
        np.testing.assert_allclose(vector, alone(decoder, text), atol=1e-5)
    middle = decoder.with_extraction(Extraction(pooling="last-token", layer=1)).encode(TEXTS[:1], progress=False)
    np.testing.assert_allclose(middle["sentence"][0], alone(decoder, TEXTS[0], layer=1), atol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_last_token_in_a_padded_plan_follows_the_mask(decoder_dir: Path, side: str) -> None:
    padded = Backbone(str(decoder_dir), device="cpu", extraction=Extraction(pooling="last-token", batching=PADDED))
    padded.tokenizer.padding_side = side
    padded._pad = _padder(padded.tokenizer)  # the pad of a tokenizer without a pad token, on this side
    got = padded.encode(TEXTS, batch_size=4, progress=False)["sentence"]  # one batch of four lengths: padded
    for text, vector in zip(TEXTS, got, strict=True):
        np.testing.assert_allclose(vector, alone(padded, text), atol=1e-5)
    if side == "left":  # without position ids from the mask, left padding moves GPT-2's learned positions
        ids = padded.tokenizer(TEXTS[1])["input_ids"]
        width = max(len(padded.tokenizer(t)["input_ids"]) for t in TEXTS)
        x = torch.tensor([[0] * (width - len(ids)) + ids])
        mask = (torch.arange(width) >= width - len(ids)).long()[None]
        with torch.no_grad():
            shifted = padded.model(input_ids=x, attention_mask=mask).last_hidden_state[0, -1].numpy()
        assert np.abs(shifted - alone(padded, TEXTS[1])).max() > 1e-2


def test_a_sentence_transformers_folder_with_last_token_pooling_keeps_it_under_layer(decoder_dir: Path,
                                                                                     tmp_path: Path) -> None:
    folder = tmp_path / "st-decoder"
    shutil.copytree(decoder_dir, folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 128, "pooling_mode_mean_tokens": False, "pooling_mode_lasttoken": True}))
    assert default_extraction(str(folder)).pooling == "last-token"
    backbone = load_backbone(str(folder), layer=-1, device="cpu")
    assert backbone.extraction.pooling == "last-token" and backbone.extraction.layer == -1
    np.testing.assert_allclose(backbone.encode(TEXTS[:1], progress=False)["sentence"][0],
                               alone(backbone, TEXTS[0]), atol=1e-5)


def test_float32_is_the_absent_default_and_a_16_bit_precision_keys_the_record() -> None:
    plain, f32, bf16 = Extraction(), Extraction(dtype="float32"), Extraction(dtype="bfloat16")
    assert plain == f32 and f32.dtype is None
    assert plain.key() == "mean-L-1-max512-equal-length" and "dtype" not in plain.to_dict()
    assert bf16.key() == "mean-L-1-max512-equal-length-bfloat16" and bf16.to_dict()["dtype"] == "bfloat16"


def test_a_cache_written_in_one_dtype_does_not_serve_another(decoder: Backbone, decoder_dir: Path,
                                                            tmp_path: Path) -> None:
    half = Backbone(str(decoder_dir), device="cpu", extraction=Extraction(pooling="last-token", dtype="bfloat16"))
    assert half.model.dtype == torch.bfloat16 and half.describe()["extraction"]["dtype"] == "bfloat16"
    full = EmbeddingStore(decoder, tmp_path, progress=False)
    X = full.sentences(TEXTS)
    assert full.stats["computed"] == len(TEXTS)
    store = EmbeddingStore(half, tmp_path, progress=False)
    Y = store.sentences(TEXTS)
    assert store.stats == {"computed": len(TEXTS), "reused": 0} and store.folder != full.folder
    assert 0 < np.abs(X - Y).max() < 0.5  # bfloat16 moves the vectors, a little
    again = EmbeddingStore(decoder, tmp_path, progress=False)
    np.testing.assert_array_equal(again.sentences(TEXTS), X)
    assert again.stats["reused"] == len(TEXTS)


def test_sums_of_layers_are_taken_in_float32(decoder_dir: Path) -> None:
    half = Backbone(str(decoder_dir), device="cpu", extraction=Extraction(pooling="first-last-avg", dtype="bfloat16"))
    enc = half.tokenizer(TEXTS[0], return_tensors="pt")
    with torch.no_grad():
        states = half.model(**enc, output_hidden_states=True).hidden_states
    expected = ((states[1].float() + states[-1].float()) / 2)[0].mean(0).numpy()
    np.testing.assert_allclose(half.encode(TEXTS[:1], progress=False)["sentence"][0], expected, rtol=1e-6, atol=1e-6)


def test_auto_is_the_checkpoints_precision_and_names_the_setup(decoder_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bf16"
    shutil.copytree(decoder_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    assert checkpoint_dtype(str(folder)) == "bfloat16" and checkpoint_dtype(str(decoder_dir)) == "float32"
    assert run_dtype(str(folder)) == "bfloat16" and run_dtype(str(folder), dtype="float32") is None
    assert load_backbone(str(folder), device="cpu").model.dtype == torch.bfloat16

    class Known:
        revision, dim = "r0", 128

    def setup(model: Path, dtype: str | None) -> dict:
        cfg = RunConfig(model=str(model), methods=["raw"], pooling="last-token", dtype=dtype)
        return variant_meta_of(cfg, Known(), "raw").experiment_kwargs

    assert setup(decoder_dir, None) == setup(decoder_dir, "float32") == {"pooling": "last-token"}
    assert setup(decoder_dir, "float16") == {"pooling": "last-token", "dtype": "float16"}
    assert setup(folder, "auto") == {"pooling": "last-token", "dtype": "bfloat16"}


def test_dtype_is_refused_on_the_pipeline_route_in_one_line(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "st-bert"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]))
    code = main(["run", "--model", str(folder), "--dtype", "bfloat16", "--methods", "raw", "--tasks", "STS16",
                 "--results", str(tmp_path / "res"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert "--dtype bfloat16" in err and "sentence-transformers pipeline" in err and "--pooling or --layer" in err


def test_outliers_on_a_decoder_find_a_planted_first_position_dimension(tmp_path: Path, capsys) -> None:
    folder = make_decoder(tmp_path / "planted", first_dim=5, first_value=40.0)
    texts = [" ".join(SENTENCES[(i + k) % 10] for k in range(3)) for i in range(10)] * 3  # ~30 tokens each
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n")
    backbone = Backbone(str(folder), device="cpu")
    report = analyse(backbone, texts, progress=False)
    assert report.n_tokens == sum(len(backbone.tokenizer(t)["input_ids"]) for t in texts)
    embeddings = report.layers[0]
    # the extreme of every first-position vector (30 of 960 vectors), of others by chance: most of its extremes
    # lie at the first position, where a dimension's share is about 30/960 by chance
    assert embeddings.first_outliers == [5] and embeddings.share(5) > 0.5
    assert np.median([embeddings.share(j) or 0.0 for j in range(128)]) < 0.1
    # over all tokens it is the extreme of about one vector in a text's length: too rare to be an outlier there
    assert embeddings.first.argmax_fraction[5] == 1.0 and 5 not in embeddings.outliers
    assert all(5 in layer.first_outliers for layer in report.layers)
    code = main(["outliers", "--model", str(folder), "--corpus", str(corpus), "--output", str(tmp_path / "out"),
                 "--no-progress"])
    assert code == 0 and "layer  0: outliers none; first position 5" in capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "local__planted-outliers.json").read_text())
    assert data["tokens"].startswith("every token") and data["layers"][0]["first_position_outliers"][0] == 5
    md = (tmp_path / "out" / "local__planted-outliers.md").read_text()
    assert "first-position dimensions" in md and "| 0       | none                 | 5" in md
    code = main(["outliers", "--model", str(folder), "--corpus", str(corpus), "--layers", "3", "--output",
                 str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "iso-bench: error: layer 3 does not exist: the model has hidden states 0..2"


def test_the_recorded_command_names_a_chosen_dtype_and_leaves_auto_out() -> None:
    from iso_bench.cli import build_parser
    from iso_bench.grid.plan import reproduce_command

    def command(*extra: str) -> str:
        args = build_parser().parse_args(["run", "--model", "org/dec", "--pooling", "last-token", "--methods", "raw",
                                          "--tasks", "STS16", *extra])
        return reproduce_command(args, "org/dec")

    base = "iso-bench run --model org/dec --methods raw --tasks STS16 --pooling last-token"
    assert command("--dtype", "bfloat16") == base + " --dtype bfloat16"
    assert command("--dtype", "auto") == command() == base


def test_an_empty_text_of_a_task_names_the_task_and_the_texts_place(decoder: Backbone, tmp_path: Path) -> None:
    """GPT-2's tokenizer adds no BOS: an empty text has no token. Leaving it out is impossible for a task's own text,
    so the error names the task and where the text is in the request; without a task, the text's place and its
    remedy (leave it out of the fit corpus)."""
    import types

    from iso_bench.backbones.hf_backbone import NoTokens

    store = EmbeddingStore(decoder, tmp_path / "cache", progress=False)
    with pytest.raises(NoTokens) as caught:
        store.sentences(["It rained.", "A plane is taking off.", ""], task_metadata=types.SimpleNamespace(name="STS16"))
    assert str(caught.value) == (
        "task STS16: its text 2 of 3 in this request ('') has no tokens: the tokenizer of "
        f"{decoder.model_id!r} adds no special tokens (no BOS), so the network has nothing to read and the task "
        "cannot be evaluated with this model's extraction; use a tokenizer that adds a BOS token")
    with pytest.raises(NoTokens, match=r"^text 0 \(''\) has no tokens: .*; leave it out$"):
        store.sentences(["", "It rained."])
