"""LLM embedders run whole through mteb's own loaders, offline, on random-weight stand-ins laid under their real
ids and pinned revisions (``benchmarks/llm_standins.py``): Qwen3-Embedding-0.6B in bfloat16 by
``q3e_instruct_loader``, gte-Qwen2-1.5B-instruct (96-d, not the 8,960 mteb declares) and e5-mistral-7b-instruct
(a Llama-style tokenizer) by ``InstructSentenceTransformerModel``."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SHARED_DATA, _missing, small_mirror

ROOT = Path(__file__).resolve().parents[1]
F16_BOUND = 5e-4
"""How far raw's main score may be from mteb.evaluate's where the forward runs in float16 or bfloat16 on the CPU:
the same texts in other batch shapes round differently in 16 bits (measured on the stand-ins' full STS16: up to
4e-5; float32: 1e-6, mteb's own rounding of a stored score)."""

QWEN3, GTE_QWEN2, E5_MISTRAL = ("Qwen/Qwen3-Embedding-0.6B", "Alibaba-NLP/gte-Qwen2-1.5B-instruct",
                                "intfloat/e5-mistral-7b-instruct")


def test_mtebs_own_loaders_run_the_standins_as_the_real_models(standin_hub: Path) -> None:
    import mteb
    import torch
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    found = {}
    for model_id in (QWEN3, GTE_QWEN2, E5_MISTRAL):
        model = mteb.get_model(model_id)
        assert isinstance(model, InstructSentenceTransformerModel)
        tok = model.model.tokenizer
        ids = tok(["A man is playing a guitar."])["input_ids"][0]
        found[model_id] = (next(model.model.parameters()).dtype, model.model.get_embedding_dimension(),
                           tok.convert_ids_to_tokens(ids[:1] + ids[-1:]))
    assert found[QWEN3] == (torch.bfloat16, 64, ["A", "<|endoftext|>"])  # its tokenizer's own EOS
    assert found[GTE_QWEN2] == (torch.float16, 96, ["A", "<|endoftext|>"])  # mteb's add_eos_token; dtype=float16
    assert found[E5_MISTRAL] == (torch.float16, 80, ["<s>", "</s>"])  # add_bos_token and add_eos_token


# ---- shared: a small STS16 (and WiC) mirror, a float32 Qwen3 stand-in, whole runs of iso-bench's runner ----------
@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """STS16's first 120 pairs, and WiC as the shared data holds it."""
    root = small_mirror(tmp_path_factory.mktemp("llm-data") / "data", ["sts16-sts"], 120)
    if not (SHARED_DATA / "wic").is_dir():
        _missing(f"{SHARED_DATA / 'wic'}")
    (root / "wic").symlink_to(SHARED_DATA / "wic")
    return root


@pytest.fixture(scope="module")
def qwen3_float32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face cache with the Qwen3 stand-in saved in float32 (mteb's loader keeps the checkpoint's dtype)."""
    cache = tmp_path_factory.mktemp("standin-hub-f32")
    _maker().make_standin(cache, QWEN3, dtype="float32")
    return cache


def _maker():
    spec = importlib.util.spec_from_file_location("llm_standins", ROOT / "benchmarks" / "llm_standins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _use_hub(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))


def _run(methods: list[str], tasks: list[str], model: str, *, data: Path, out: Path):
    from iso_bench.grid.runner import RunConfig, run

    return run(RunConfig(model=model, methods=methods, tasks=tasks, results_dir=out / "results",
                         cache_dir=out / "cache", data_dir=str(data), progress=False))


def _mteb_score(model_id: str, task: str, data: Path) -> float:
    import mteb

    from iso_bench.data import get_task

    result = mteb.evaluate(mteb.get_model(model_id), get_task(task, data), cache=None, show_progress_bar=False)
    return result.task_results[0].scores["test"][0]["main_score"]


def _record(out: Path, variant: str, task: str) -> dict:
    (path,) = (out / "results").glob(f"*/{variant.replace('/', '__')}/*/**/{task}.json")
    return json.loads(path.read_text())["scores"]["test"][0]


# ---- raw is mteb's own evaluation -------------------------------------------------------------------------------
def test_raw_agrees_with_mtebs_evaluation_within_1e6_in_float32(qwen3_float32: Path, small_data: Path,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_hub(monkeypatch, qwen3_float32)
    summary = _run(["raw"], ["STS16"], QWEN3, data=small_data, out=tmp_path)
    record = _record(tmp_path, f"{QWEN3}+raw", "STS16")
    assert record["main_score"] == pytest.approx(_mteb_score(QWEN3, "STS16", small_data), abs=1e-6)
    assert summary.encode_stats["computed"] > 0 and "dtype" not in record["iso_bench"]["extraction"]  # float32


def test_raw_level_token_is_raw_through_the_instruction_wrappers_last_token(qwen3_float32: Path, standin_hub: Path,
                                                                           small_data: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The EOS row last-token pooling reads (after the task's instruction), transformed by nothing, then the
    pipeline's own Pooling and Normalize: raw's score, in float32 and within the 16-bit bound in bfloat16."""
    for cache, bound in ((qwen3_float32, 1e-6), (standin_hub, F16_BOUND)):
        _use_hub(monkeypatch, cache)
        out = tmp_path / cache.name
        _run(["raw", "raw-level=token"], ["STS16"], QWEN3, data=small_data, out=out)
        raw = _record(out, f"{QWEN3}+raw", "STS16")["main_score"]
        assert _record(out, f"{QWEN3}+raw-level=token", "STS16")["main_score"] == pytest.approx(raw, abs=bound)


@pytest.mark.parametrize(("model_id", "template"), [
    (GTE_QWEN2, "mteb.models.model_implementations.gte_models.instruction_template"),  # a function
    (E5_MISTRAL, "Instruct: {instruction}\nQuery: "),  # a string
])
def test_a_16_bit_forward_agrees_within_its_bound_and_is_recorded(model_id: str, template: str, standin_hub: Path,
                                                                  small_data: Path, tmp_path: Path) -> None:
    _run(["raw"], ["STS16"], model_id, data=small_data, out=tmp_path)
    record = _record(tmp_path, f"{model_id}+raw", "STS16")
    assert record["main_score"] == pytest.approx(_mteb_score(model_id, "STS16", small_data), abs=F16_BOUND)
    extraction = record["iso_bench"]["extraction"]
    assert extraction["dtype"] == "float16"  # mteb's model_kwargs
    assert extraction["instruction_template"] == template
    assert extraction["implementation"].endswith("InstructSentenceTransformerModel")


@pytest.mark.parametrize("model_id", [GTE_QWEN2, E5_MISTRAL])
def test_the_instructions_tokens_are_left_out_with_each_tokenizer(model_id: str, standin_hub: Path) -> None:
    """gte-Qwen2's byte-level BPE (EOS from mteb's add_eos_token) and e5-mistral's Llama-style one (BOS and EOS):
    a text's token vectors are its own tokens', after the instruction, without special tokens."""
    import mteb
    from mteb.types import PromptType

    from iso_bench.backbones.loader import load_backbone

    backbone = load_backbone(model_id, device="cpu")
    scifact = mteb.get_task("SciFact").metadata
    assert backbone.instruction(scifact, PromptType.query) == f"Instruct: {scifact.prompt['query']}\nQuery: "
    texts = ["A man is playing a guitar.", "money"]
    ids = backbone.token_ids(texts, task_metadata=scifact, prompt_type=PromptType.query)
    assert [backbone.st.tokenizer.decode(i).strip() for i in ids] == texts
    tokens = backbone.encode(texts, kinds=("tokens",), task_metadata=scifact, prompt_type=PromptType.query,
                             progress=False)["tokens"]
    assert [len(t) for t in tokens] == [len(i) for i in ids]


# ---- the instruction: mteb's wrapper's own, left out of the token vectors ---------------------------------------
def test_the_instruction_is_the_wrappers_and_its_tokens_are_left_out(qwen3_float32: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import mteb
    from datasets import Dataset
    from mteb.types import PromptType
    from torch.utils.data import DataLoader

    from iso_bench.backbones.loader import load_backbone

    _use_hub(monkeypatch, qwen3_float32)
    backbone = load_backbone(QWEN3, device="cpu")
    scifact = mteb.get_task("SciFact").metadata
    texts = ["A man is playing a guitar.", "money", "The cat sat on the mat and looked at the dog."]
    instruction = backbone.instruction(scifact, PromptType.query)
    assert instruction == f"Instruct: {scifact.prompt['query']}\nQuery:"  # Qwen3's template of the task's prompt
    assert backbone.instruction(scifact, PromptType.document) == ""  # apply_instruction_to_passages=False
    ours = backbone.encode(texts, kinds=("sentence", "tokens"), task_metadata=scifact, prompt_type=PromptType.query,
                           progress=False)
    loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=8)
    theirs = backbone.model.encode(loader, task_metadata=scifact, hf_split="test", hf_subset="default",
                                   prompt_type=PromptType.query)
    np.testing.assert_allclose(np.stack(ours["sentence"]), theirs, atol=1e-6)  # the wrapper's own vectors
    tokenizer = backbone.st.tokenizer
    ids = backbone.token_ids(texts, task_metadata=scifact, prompt_type=PromptType.query)
    assert [tokenizer.decode(i) for i in ids] == texts  # the text's own tokens: no instruction, no EOS
    plain = backbone.encode(texts, kinds=("tokens",), progress=False)["tokens"]
    for with_instruction, alone, own in zip(ours["tokens"], plain, ids, strict=True):
        assert with_instruction.shape == alone.shape == (len(own), 64)
        # under causal attention the instruction still shapes every token after it
        assert np.abs(with_instruction - alone).max() > 1e-3


def test_none_falls_back_to_the_default_prompt_and_empty_does_not(qwen3_float32: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """sentence-transformers' rule for the ``prompt=`` the wrapper passes: None (a document under
    ``apply_instruction_to_passages=False``) takes the pipeline's default prompt; "" (a task without instruction,
    which Qwen3's template makes "") is no prompt."""
    import mteb
    from mteb.types import PromptType

    from iso_bench.backbones.loader import load_backbone

    _use_hub(monkeypatch, qwen3_float32)
    backbone = load_backbone(QWEN3, device="cpu")
    backbone.st.default_prompt_name = "query"
    scifact, sts = mteb.get_task("SciFact").metadata, mteb.get_task("STS16").metadata
    assert backbone.instruction(scifact, PromptType.document) == backbone.st.prompts["query"]
    assert backbone.prompt_context(sts) == "Instruct: Retrieve semantically similar text.\nQuery:"  # mteb's
    assert backbone.prompt_context() is None  # no task: no instruction, which the template makes "": no prompt


# ---- whole runs: token-level methods and WiC, the true width, a second run, the identity across processes -------
def test_token_level_methods_and_wic_run_and_a_second_run_finds_every_result(standin_hub: Path, small_data: Path,
                                                                            tmp_path: Path) -> None:
    methods, tasks = ["raw", "whiten", "cluster-pca"], ["STS16", "WiC"]
    first = _run(methods, tasks, QWEN3, data=small_data, out=tmp_path)
    assert not first.errors and all(first.scores[f"{QWEN3}+{m}"][t] is not None for m in methods for t in tasks)
    record = _record(tmp_path, f"{QWEN3}+cluster-pca", "WiC")["iso_bench"]
    assert record["extraction"]["dtype"] == "bfloat16"  # the checkpoint's own dtype (transformers' "auto")
    assert record["extraction"]["batching"] == "equal-length"
    storage = {row for db in (tmp_path / "cache").rglob("index.sqlite") for row in sqlite3.connect(db).execute(
        "SELECT kind, storage FROM shards WHERE kind IN ('sentence', 'tokens')")}
    assert storage == {("sentence", "bfloat16"), ("tokens", "bfloat16")}  # a bfloat16 forward's vectors: 16 bits
    assert record["instructions"] == {"none": "", "query": "", "document": ""}  # WiC names none; Qwen3's template
    sts = _record(tmp_path, f"{QWEN3}+raw", "STS16")["iso_bench"]["instructions"]
    assert sts["none"] == "Instruct: Retrieve semantically similar text.\nQuery:" and sts["document"] == ""
    again = _run(methods, tasks, QWEN3, data=small_data, out=tmp_path)
    assert again.encode_stats["computed"] == 0 and not any(again.fits_run.values())
    assert all(again.scores[v][t] == pytest.approx(first.scores[v][t], abs=1e-6) for v in first.scores for t in tasks)


def test_gte_qwen2_runs_at_its_files_width_and_names_mtebs_other_width(standin_hub: Path, small_data: Path,
                                                                       tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    from iso_bench.methods import MethodError

    with pytest.raises(MethodError, match=r"whiten-2048.*gives 96-d sentence vectors"):
        _run(["raw", "whiten-2048"], ["STS16"], GTE_QWEN2, data=small_data, out=tmp_path)  # refused before work
    summary = _run(["raw", "whiten-64"], ["STS16"], GTE_QWEN2, data=small_data, out=tmp_path)
    assert not summary.errors and summary.scores[f"{GTE_QWEN2}+whiten-64"]["STS16"] is not None
    notes = [r.getMessage() for r in caplog.records if "embed_dim" in r.getMessage()]
    assert notes[0] == (f"note: mteb's metadata of {GTE_QWEN2} declares embed_dim=8960; its files give 96-d "
                        "sentence vectors, which iso-bench uses")
    (meta,) = (tmp_path / "results").glob(f"*/{GTE_QWEN2.replace('/', '__')}+whiten-64/**/model_meta.json")
    assert json.loads(meta.read_text())["embed_dim"] == 64  # the variant's registered width, from 96


IDENTITY = """
import json, sys
from iso_bench.backbones.loader import load_backbone
json.dump({m: load_backbone(m, device="cpu").describe() for m in sys.argv[1:]}, sys.stdout)
"""


def test_the_identity_is_the_same_in_another_process(standin_hub: Path) -> None:
    from iso_bench.backbones.loader import load_backbone

    models = [GTE_QWEN2, E5_MISTRAL]
    run = subprocess.run([sys.executable, "-c", IDENTITY, *models], check=True, capture_output=True, text=True)
    there = json.loads(run.stdout)
    for model_id in models:
        here = load_backbone(model_id, device="cpu").describe()
        assert here == there[model_id]
        assert here["extraction"]["dtype"] == "float16"


def test_an_instruction_models_variant_is_not_exported(standin_hub: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from iso_bench.cli import main

    code = main(["export", f"{QWEN3}+whiten", "--fit-corpus", "task:STS16", "-o", str(tmp_path / "out"),
                 "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and not (tmp_path / "out").exists()
    assert err[-1] == (f"iso-bench: error: {QWEN3} is run by mteb's instruction wrapper, which puts each task's own "
                       "instruction before its texts; a sentence-transformers folder cannot carry per-task "
                       "instructions, so its variants are not exported: run them with iso-bench run")


def test_the_same_instruction_models_files_as_a_folder_are_not_exported(llm_standin_cache: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The guard is the model's, not the route's: Qwen3's files given as a local folder run as a plain
    sentence-transformers pipeline, whose prompts still carry its instruction; refused in one line, nothing written."""
    from iso_bench.cli import main

    folder = next((llm_standin_cache / "models--Qwen--Qwen3-Embedding-0.6B" / "snapshots").iterdir())
    (tmp_path / "corpus.txt").write_text("a man plays a guitar\nthe cat sat on the mat\n", encoding="utf-8")
    code = main(["export", f"{folder}+center", "--fit-corpus", str(tmp_path / "corpus.txt"), "-o",
                 str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not (tmp_path / "out").exists()
    assert err[-1] == (f"iso-bench: error: local/{folder.name} carries prompts (query) that put an instruction "
                       "before the texts they are named for; its variant is fitted on vectors of other texts than "
                       "those a caller of the exported folder would get, so its variants are not exported: run them "
                       "with iso-bench run")


def test_a_local_folders_16_bit_forward_is_recorded_and_keys_its_cache(llm_standin_cache: Path,
                                                                       qwen3_float32: Path) -> None:
    """The pipeline route (a sentence-transformers folder mteb does not list) records the dtype too; float32 is its
    absence, so the folder of a float32 model keeps the name it always had."""
    from iso_bench.backbones.loader import load_backbone

    folder = next((llm_standin_cache / "models--Qwen--Qwen3-Embedding-0.6B" / "snapshots").iterdir())
    extraction = load_backbone(str(folder), device="cpu").extraction
    assert extraction.to_dict()["dtype"] == "bfloat16" and extraction.key().endswith("-equal-length-bfloat16")
    assert "instruction_template" not in extraction.to_dict()  # ST's own prompts: no instruction wrapper
    plain = next((qwen3_float32 / "models--Qwen--Qwen3-Embedding-0.6B" / "snapshots").iterdir())
    extraction = load_backbone(str(plain), device="cpu").extraction
    assert "dtype" not in extraction.to_dict() and extraction.key().endswith("-equal-length")


def test_a_wrapper_with_an_encode_of_its_own_is_refused_token_methods_in_one_line_before_loading() -> None:
    """Decided from mteb's loader class where it is one: NV-Embed's wrapper keeps the instruction wrapper's encode
    (token vectors); GeeVec's lite wrapper has its own (sentence vectors only, a token-level spec refused)."""
    from iso_bench.checks import check_methods, describe_model
    from iso_bench.methods import MethodError

    geevec = "geevec-ai/geevec-embeddings-1.0-lite"
    assert describe_model("nvidia/NV-Embed-v2").no_tokens is None
    model = describe_model(geevec)
    assert model.no_tokens == f"mteb runs {geevec} by GeeVecLiteModel, which gives sentence vectors only"
    with pytest.raises(MethodError) as err:
        check_methods(["raw", "cluster-pca"], model.dims(), geevec, no_tokens=model.no_tokens)
    assert str(err.value).startswith(f"cluster-pca is a token-level method and {geevec} yields no token vectors")
    assert "\n" not in str(err.value)
