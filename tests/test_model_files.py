"""A model's own files, read before and while it loads: one reader whose errors are one line naming the file, each
file parsed once per resolve; a folder without a tokenizer named as such; a window shorter than the tokenizer's
maximum recorded as the extraction's. The models are the tiny random BERT of conftest.py and copies of it."""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import pytest

from iso_bench.backbones.base import BackboneError
from iso_bench.backbones.hf_backbone import Backbone, Extraction, default_extraction
from iso_bench.backbones.loader import extraction_dtype, load_backbone, resolve
from iso_bench.backbones.precision import checkpoint_dtype, config_dtype
from tests.conftest import WORDS

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_hub(cache: Path, repo: str, folder: Path, commit: str = COMMIT, branch: str = "main") -> Path:
    """``folder``'s files as the Hugging Face cache holds ``repo`` at ``commit`` (``refs/<branch>`` names it)."""
    root = cache / f"models--{repo.replace('/', '--')}"
    shutil.copytree(folder, root / "snapshots" / commit)
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / branch).write_text(commit)
    return root / "snapshots" / commit


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_truncated_config_is_one_line_naming_the_file_in_a_folder_and_in_the_hub_cache(tiny_bert_dir: Path,
                                                                                          tmp_path: Path,
                                                                                          hub: Path) -> None:
    folder = tmp_path / "cut"
    shutil.copytree(tiny_bert_dir, folder)
    whole = (folder / "config.json").read_text()
    (folder / "config.json").write_text(whole[: len(whole) // 2])
    with pytest.raises(BackboneError) as exc:
        resolve(str(folder))
    assert str(folder / "config.json") in one_line(exc) and "damaged or cut short" in str(exc.value)
    snapshot = lay_hub(hub, "org/cut", folder)
    with pytest.raises(BackboneError) as exc:
        resolve("org/cut", pooling="mean")
    assert str(snapshot / "config.json") in one_line(exc)
    with pytest.raises(BackboneError) as exc:
        load_backbone(str(folder), device="cpu", pooling="mean")
    assert "config.json" in one_line(exc)


def test_one_resolve_parses_each_file_once(tiny_bert_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "st"
    shutil.copytree(tiny_bert_dir, folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16,
                                                                   "pooling_mode_cls_token": True}))
    reads: Counter[str] = Counter()
    read_bytes = Path.read_bytes

    def counted(path: Path) -> bytes:
        reads[str(path.relative_to(folder))] += 1
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    model = resolve(str(folder), layer=1)
    assert extraction_dtype(model, None) is None and checkpoint_dtype(str(folder)) == "float32"
    assert default_extraction(str(folder), model.revision, model.modules).pooling == "cls" and model.width == 16
    assert reads["config.json"] == 1 and reads["modules.json"] == 1 and reads["1_Pooling/config.json"] == 1


def test_the_two_dtype_answers_come_from_one_parser(tiny_bert_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "f64"
    shutil.copytree(tiny_bert_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    for recorded, files_say, runs_in in (("float64", "float64", "float32"), ("torch.float16", "float16", "float16"),
                                         ("float32", None, "float32")):
        (folder / "config.json").write_text(json.dumps({**config, "dtype": recorded}))
        assert resolve(str(folder)).dtype == files_say and checkpoint_dtype(str(folder)) == runs_in
    (folder / "config.json").write_text(json.dumps({**config, "dtype": None, "text_config": {"dtype": "bfloat16"}}))
    assert config_dtype(json.loads((folder / "config.json").read_text())) == "bfloat16"
    assert resolve(str(folder)).dtype == "bfloat16" == checkpoint_dtype(str(folder))


def without_tokenizer(source: Path, folder: Path) -> Path:
    """A copy of ``source`` holding its config and weights only."""
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(source / name, folder / name)
    return folder


def test_a_folder_without_tokenizer_files_is_refused_naming_the_tokenizer(tiny_bert_dir: Path, tmp_path: Path) -> None:
    folder = without_tokenizer(tiny_bert_dir, tmp_path / "no-tokenizer")
    with pytest.raises(BackboneError) as exc:
        Backbone(str(folder), device="cpu")
    assert "the tokenizer of" in one_line(exc) and "have no tokenizer" in str(exc.value)
    assert "leave it out" not in str(exc.value)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16,
                                                                   "pooling_mode_mean_tokens": True}))
    with pytest.raises(BackboneError) as exc:
        load_backbone(str(folder), device="cpu")  # the pipeline route
    assert "have no tokenizer" in one_line(exc)
    assert len(Backbone(str(tiny_bert_dir), device="cpu").tokenizer) == 5 + len(WORDS)  # its 5 special tokens


def test_a_model_mteb_runs_missing_from_the_cache_is_one_line(hub: Path) -> None:
    with pytest.raises(BackboneError) as exc:
        load_backbone("sentence-transformers/all-MiniLM-L6-v2", device="cpu")  # mteb's route; the cache is empty
    message = one_line(exc)
    assert message.startswith("cannot load mteb's implementation of 'sentence-transformers/all-MiniLM-L6-v2'")
    assert message.endswith("HF_HUB_OFFLINE=1 is set: put the model into the Hugging Face cache first (HF_HUB_CACHE)")


def st_folder(source: Path, folder: Path, pooling: dict, dense: bool = False) -> Path:
    """``source`` as a sentence-transformers folder: Transformer, Pooling of ``pooling``, a Dense head if asked."""
    shutil.copytree(source, folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if dense:
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 16, **pooling}))
    return folder


@pytest.mark.parametrize(("pooling", "dense", "said"), [
    ({"pooling_mode_max_tokens": True}, False, "max pooling"),
    ({"pooling_mode_weightedmean_tokens": True}, False, "weightedmean pooling"),
    ({"pooling_mode_mean_sqrt_len_tokens": True}, False, "mean_sqrt_len pooling"),
    ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, False, "mean+max pooling"),
    ({"pooling_mode_mean_tokens": True}, True, "a Dense head"),
])
def test_layer_on_a_pipeline_it_cannot_replay_is_refused_in_one_line(tiny_bert_dir: Path, tmp_path: Path,
                                                                     pooling: dict, dense: bool, said: str) -> None:
    folder = st_folder(tiny_bert_dir, tmp_path / "st", pooling, dense)
    with pytest.raises(BackboneError) as exc:
        load_backbone(str(folder), device="cpu", layer=-1)
    assert f"pools its sentence vectors by {said}" in one_line(exc) and "--pooling" in str(exc.value)
    assert load_backbone(str(folder), device="cpu", layer=-1, pooling="mean").extraction.pooling == "mean"


@pytest.mark.parametrize(("mode", "ours"), [("pooling_mode_mean_tokens", "mean"), ("pooling_mode_cls_token", "cls"),
                                            ("pooling_mode_lasttoken", "last-token")])
def test_layer_on_a_pipeline_whose_pooling_iso_bench_replays_keeps_it(tiny_bert_dir: Path, tmp_path: Path, mode: str,
                                                                      ours: str) -> None:
    folder = st_folder(tiny_bert_dir, tmp_path / "st", {mode: True})
    backbone = load_backbone(str(folder), device="cpu", layer=1)
    assert backbone.describe()["extraction"]["pooling"] == ours and backbone.extraction.layer == 1


MINILM, PINNED = "sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a"


def test_a_branch_is_resolved_to_its_commit_before_the_route_is_chosen(tiny_bert_dir: Path, tmp_path: Path,
                                                                       hub: Path) -> None:
    folder = st_folder(tiny_bert_dir, tmp_path / "st", {"pooling_mode_mean_tokens": True})
    lay_hub(hub, MINILM, folder, PINNED)  # refs/main names mteb's pinned commit
    model = resolve(MINILM, "main")
    assert (model.how, model.revision) == ("mteb", PINNED)
    assert resolve(MINILM, PINNED[:10]).revision == PINNED  # a short commit, among the cached snapshots
    lay_hub(hub, MINILM, folder, COMMIT)  # main has moved on
    with pytest.raises(BackboneError) as exc:
        resolve(MINILM, "main")
    assert f"--revision {COMMIT}: mteb implements {MINILM!r} at revision {PINNED}" in one_line(exc)
    own = resolve(MINILM, "main", pooling="mean")  # iso-bench's own extraction, at the branch's commit
    assert (own.how, own.revision) == ("hf", COMMIT)
    with pytest.raises(BackboneError) as exc:
        resolve(MINILM, "dev")
    assert "--revision dev: cannot resolve it to a commit" in one_line(exc) and "refs/dev" in str(exc.value)


def test_a_window_shorter_than_max_length_names_the_namespace_and_truncation_is_said(
        tiny_bert_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    backbone = Backbone(str(tiny_bert_dir), device="cpu")  # 64 positions, its tokenizer's maximum 64
    assert backbone.extraction.max_length == backbone.max_length == 64
    assert backbone.extraction.key() == "mean-L-1-max64-equal-length"
    assert backbone.with_extraction(Extraction(max_length=512)).extraction.key() == "mean-L-1-max64-equal-length"
    long = " ".join(WORDS[i % 18] for i in range(100))  # 100 words of the vocabulary, one token each
    with caplog.at_level(logging.WARNING, logger="iso_bench.backbones.hf_backbone"):
        backbone.encode(["a cat sat on the mat", long], progress=False)
    assert [r.getMessage() for r in caplog.records] == [
        f"1 of 2 texts reach the window of {backbone.model_id} (64 tokens) and are cut there"]
