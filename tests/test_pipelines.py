"""Any encoder a user brings runs through its own pipeline: a sentence-transformers folder with max pooling and a
Dense layer, a static model distilled with model2vec, and a model without token vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["A man is playing a guitar.", "hello world", "money", "A woman slices a cucumber on a board.",
         "The cat sat on the mat and looked at the dog for a long time."]


def _st_vectors(folder: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu").encode(texts, convert_to_numpy=True)


@pytest.mark.slow
def test_a_pipeline_with_max_pooling_and_a_dense_layer_is_encoded_as_itself(max_dense_dir: Path) -> None:
    from iso_bench.backbones.loader import load_backbone

    backbone = load_backbone(str(max_dense_dir))
    extraction = backbone.describe()["extraction"]
    assert extraction["modules"] == ["Transformer", "Pooling(max)", "Dense(256)", "Normalize"]
    assert backbone.model_id == "local/minilm-max-dense" and backbone.dim == 256
    ours = np.stack(backbone.encode(TEXTS, progress=False)["sentence"])
    np.testing.assert_allclose(ours, _st_vectors(max_dense_dir, TEXTS), atol=1e-6)
    # iso-bench's own extraction (mean pooling of the hidden states, no Dense) is another encoder altogether
    mean = np.stack(load_backbone(str(max_dense_dir), pooling="mean").encode(TEXTS, progress=False)["sentence"])
    assert mean.shape[1] == 384


def _run(args: list[str]) -> int:
    from iso_bench.cli import main

    return main(["run", "--data-dir", str(SHARED_DATA), "--no-progress", *args])


def _result(results: Path, variant: str, task: str = "STSBenchmark") -> tuple[dict, str]:
    (path,) = (results / "results").glob(f"{variant}/*/**/{task}.json")
    text = path.read_text()
    return json.loads(text), text


def _mteb_score(folder: Path) -> float:
    """STSBenchmark scored by mteb on the pipeline's own ``encode``, without iso-bench's backbone."""
    import mteb
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from iso_bench.data import get_task

    model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(folder), device="cpu"))
    result = mteb.evaluate(model, get_task("STSBenchmark", SHARED_DATA), cache=None, show_progress_bar=False)
    return result.task_results[0].scores["test"][0]["main_score"]


@pytest.mark.slow
def test_raw_of_a_local_pipeline_is_the_pipelines_own_score(max_dense_dir: Path, tmp_path: Path, hub_mirror) -> None:
    results = tmp_path / "results"
    assert _run(["--model", str(max_dense_dir), "--methods", "raw", "--tasks", "STSBenchmark",
                 "--results", str(results), "--cache-dir", str(tmp_path / "cache")]) == 0
    data, text = _result(results, "local__minilm-max-dense+raw")
    # mteb rounds a stored main score to 6 decimals, and the vectors agree to 1e-6 (the test above)
    assert data["scores"]["test"][0]["main_score"] == pytest.approx(_mteb_score(max_dense_dir), abs=5e-6)
    record = data["scores"]["test"][0]["iso_bench"]
    # named and identified by a name and a digest; the recorded command names the folder by its name, never its path
    assert "--model ./minilm-max-dense " in record.pop("command")
    assert str(max_dense_dir) not in json.dumps(record) and str(max_dense_dir) not in text
    assert record["model"] == "local/minilm-max-dense" and record["revision"].startswith("local-")


@pytest.mark.slow
def test_a_static_model_runs_every_kind_of_method(static_minilm_dir: Path, tmp_path: Path, hub_mirror) -> None:
    recipe = json.loads((static_minilm_dir / "iso_bench_recipe.json").read_text())
    assert recipe["recipe"]["pca_dims"] is None and recipe["recipe"]["sif_coefficient"] is None
    results = tmp_path / "results"
    assert _run(["--model", str(static_minilm_dir), "--methods", "raw", "whiten", "abtt", "cluster-pca", "--tasks",
                 "STSBenchmark", "--results", str(results), "--cache-dir", str(tmp_path / "cache")]) == 0
    score = {v: _result(results, f"local__static-minilm+{v}")[0]["scores"]["test"][0]["main_score"]
             for v in ("raw", "whiten", "abtt", "cluster-pca")}
    assert score["raw"] == pytest.approx(_mteb_score(static_minilm_dir), abs=5e-6)
    assert 0.50 < score["raw"] < 0.62  # about 55.7 (the figure for this recipe)
    assert score["whiten"] > score["raw"] + 0.1 and score["abtt"] > score["raw"]
    record = _result(results, "local__static-minilm+cluster-pca")[0]["scores"]["test"][0]["iso_bench"]
    assert record["variant"]["level"] == "token" and record["extraction"]["modules"] == ["StaticEmbedding", "Normalize"]


def test_static_token_vectors_are_the_embedding_rows_of_the_texts_tokens(static_minilm_dir: Path) -> None:
    """The mean of a text's token vectors, normalised, is the model's own sentence vector."""
    from iso_bench.backbones.loader import load_backbone

    backbone = load_backbone(str(static_minilm_dir))
    out = backbone.encode(TEXTS, kinds=("sentence", "tokens"), progress=False)
    for tokens, sentence in zip(out["tokens"], out["sentence"], strict=True):
        mean = tokens.mean(axis=0)
        np.testing.assert_allclose(mean / np.linalg.norm(mean), sentence, atol=1e-6)
    assert [len(t) for t in out["tokens"]] == [len(ids) for ids in backbone.token_ids(TEXTS)]
    np.testing.assert_allclose(np.stack(out["sentence"]), _st_vectors(static_minilm_dir, TEXTS), atol=1e-6)


def test_a_token_level_method_on_a_model_without_token_vectors_is_refused_before_work(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    code = _run(["--model", "openai/text-embedding-3-large", "--methods", "raw", "cluster-pca", "--tasks",
                 "STSBenchmark", "--results", str(results)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "cluster-pca is a token-level method" in err[0] and "openai/text-embedding-3-large" in err[0]
    assert not results.exists()  # refused before any work
