"""Pooling and span extraction on a tiny random BERT, checked against the network's own hidden states."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iso_bench.backbones.base import BackboneError
from iso_bench.backbones.hf_backbone import Backbone, Extraction, default_extraction
from iso_bench.backbones.loader import load_backbone

TEXTS = ["the cat sat on the mat", "a dog", "the man is playing the guitar , the woman plays piano !"]


def hidden_states(bb: Backbone, text: str) -> tuple:
    enc = bb.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = bb.model(**enc, output_hidden_states=True)
    return out.hidden_states, enc


def test_mean_pooling_matches_hidden_states_and_ignores_padding(tiny_backbone: Backbone) -> None:
    vecs = tiny_backbone.encode(TEXTS, kinds=("sentence",), batch_size=3, progress=False)["sentence"]
    for text, vec in zip(TEXTS, vecs, strict=True):
        states, _ = hidden_states(tiny_backbone, text)  # alone: no padding at all
        np.testing.assert_allclose(vec, states[-1][0].mean(0).numpy(), atol=1e-5)


def test_cls_and_first_last_avg(tiny_backbone: Backbone) -> None:
    cls = tiny_backbone.with_extraction(Extraction(pooling="cls"))
    fla = tiny_backbone.with_extraction(Extraction(pooling="first-last-avg"))
    v_cls = cls.encode(TEXTS, progress=False)["sentence"]
    v_fla = fla.encode(TEXTS, progress=False)["sentence"]
    for i, text in enumerate(TEXTS):
        states, _ = hidden_states(tiny_backbone, text)
        np.testing.assert_allclose(v_cls[i], states[-1][0, 0].numpy(), atol=1e-5)
        expected = ((states[1][0] + states[-1][0]) / 2).mean(0).numpy()  # hidden_states[0] is the embedding layer
        np.testing.assert_allclose(v_fla[i], expected, atol=1e-5)


def test_layer_choice_and_normalize(tiny_backbone: Backbone) -> None:
    mid = tiny_backbone.with_extraction(Extraction(pooling="mean", layer=1, normalize=True))
    vec = mid.encode(TEXTS[:1], progress=False)["sentence"][0]
    states, _ = hidden_states(tiny_backbone, TEXTS[0])
    expected = states[1][0].mean(0).numpy()
    np.testing.assert_allclose(vec, expected / np.linalg.norm(expected), atol=1e-5)


def test_token_vectors_drop_special_tokens(tiny_backbone: Backbone) -> None:
    toks = tiny_backbone.encode(TEXTS, kinds=("tokens",), progress=False)["tokens"]
    for text, t in zip(TEXTS, toks, strict=True):
        states, enc = hidden_states(tiny_backbone, text)
        assert t.shape == (enc["input_ids"].shape[1] - 2, tiny_backbone.dim)
        np.testing.assert_allclose(t, states[-1][0, 1:-1].numpy(), atol=1e-5)


def test_span_is_mean_of_its_subtokens(tiny_backbone: Backbone) -> None:
    text = "the cat was unbelievable !"
    start = text.index("unbelievable")
    span = (start, start + len("unbelievable"))
    out = tiny_backbone.encode([text, "a dog"], kinds=("span",), spans=[[span, (4, 7)], [(2, 5)]], progress=False)
    assert [m.shape for m in out["span"]] == [(2, 16), (1, 16)]
    states, enc = hidden_states(tiny_backbone, text)
    pieces = tiny_backbone.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    idx = [i for i, p in enumerate(pieces) if p in ("un", "##believ", "##able")]
    assert len(idx) == 3  # the word is split into three sub-tokens
    np.testing.assert_allclose(out["span"][0][0], states[-1][0, idx].mean(0).numpy(), atol=1e-5)
    np.testing.assert_allclose(out["span"][0][1], states[-1][0, pieces.index("cat")].numpy(), atol=1e-5)


def test_empty_span_is_an_error(tiny_backbone: Backbone) -> None:
    with pytest.raises(ValueError, match="covers no token"):
        tiny_backbone.encode(["a dog"], kinds=("span",), spans=[[(1, 2)]], progress=False)


def test_bad_layer_and_model_give_clear_errors(tiny_bert_dir) -> None:
    with pytest.raises(BackboneError, match="layer 9 does not exist"):
        Backbone(str(tiny_bert_dir), extraction=Extraction(layer=9))
    with pytest.raises(BackboneError, match="cannot load model"):
        Backbone(str(tiny_bert_dir / "nope"))


def _copy(folder, tmp_path, **config):
    """A copy of the model folder with ``config`` changed in its config.json."""
    import json
    import shutil

    out = tmp_path / "model"
    shutil.copytree(folder, out)
    data = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**data, **config}))
    return out


def test_a_folder_whose_config_no_longer_fits_its_weights_is_one_line_not_a_traceback(
        tiny_bert_dir, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from iso_bench.cli import main
    from tests.conftest import SHARED_DATA

    folder = _copy(tiny_bert_dir, tmp_path, hidden_size=32)  # the weights are 16-d
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackboneError) as caught:
        Backbone(str(folder))
    assert str(caught.value) == (
        f"cannot load model {str(folder)!r} (revision None): its weights do not fit the folder's config.json "
        "(tensor shapes differ, as transformers' load report above lists); put back the config.json the weights "
        "were saved with, or save the model again (save_pretrained)")
    code = main(["run", "--model", str(folder), "--methods", "raw", "--tasks", "STS12", "--results",
                 str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache"), "--data-dir", str(SHARED_DATA),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("iso-bench: error:")] == [
        f"iso-bench: error: {caught.value}"]


def test_a_local_folder_gets_no_hub_hint(tiny_bert_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(tiny_bert_dir, tmp_path)
    (folder / "model.safetensors").unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackboneError, match="check the folder: it needs config.json, the weights and a tokenizer") as e:
        Backbone(str(folder))
    assert "HF_HUB_OFFLINE" not in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(BackboneError, match="HF_HUB_OFFLINE=1 is set: put the model into the Hugging Face cache"):
        Backbone("no-such-org/no-such-model")  # a hub id keeps the hint


def test_local_folder_revision_is_a_content_hash(tiny_backbone: Backbone) -> None:
    assert tiny_backbone.revision.startswith("local-") and len(tiny_backbone.revision) == 46


def test_default_extraction_reads_sentence_transformers_config(tmp_path) -> None:
    (tmp_path / "modules.json").write_text(
        '[{"path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]'
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    assert default_extraction(str(tmp_path)) == Extraction(pooling="cls", normalize=True, max_length=128)
    assert default_extraction(str(tmp_path / "missing")) == Extraction()


def test_span_beyond_max_length_is_nan(tiny_backbone: Backbone) -> None:
    short = tiny_backbone.with_extraction(Extraction(max_length=5))  # [CLS] + 3 words + [SEP]
    text = "the cat sat on the mat"
    out = short.encode([text], kinds=("span",), spans=[[(4, 7), (19, 22)]], progress=False)["span"][0]
    assert np.isfinite(out[0]).all() and np.isnan(out[1]).all()


def test_the_hf_backbone_says_so_and_ignores_prompts(tiny_backbone: Backbone) -> None:
    assert tiny_backbone.describe()["vectors"] == tiny_backbone.describe()["extraction"]["vectors"] == "hf"
    assert tiny_backbone.prompt_context("any task", "query") is None
    plain = tiny_backbone.encode(TEXTS[:1], progress=False)["sentence"][0]
    asked = tiny_backbone.encode(TEXTS[:1], progress=False, task_metadata="any task", prompt_type="query")
    np.testing.assert_array_equal(asked["sentence"][0], plain)


def test_load_backbone_runs_a_model_mteb_does_not_know_with_the_hf_backbone(tiny_bert_dir) -> None:
    backbone = load_backbone(str(tiny_bert_dir), device="cpu")
    assert isinstance(backbone, Backbone) and backbone.describe()["vectors"] == "hf"
    assert backbone.extraction == Extraction(pooling="mean", max_length=64)  # the window of its 64 positions
    cls = load_backbone(str(tiny_bert_dir), device="cpu", pooling="cls", layer=1)
    assert (cls.extraction.pooling, cls.extraction.layer) == ("cls", 1)
    assert isinstance(load_backbone(str(tiny_bert_dir), device="cpu", hidden_states=True), Backbone)
