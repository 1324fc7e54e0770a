"""A token-level variant is the model with a step before its pooling: the rows the pooling reads, transformed, then
the pipeline's own pooling and head. So ``raw-level=token`` gives the raw sentence vectors on every pooling and head,
a method's output has raw's width, and principal-coordinate methods are mapped back into the model's coordinates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MINILM
from tests.test_export import static_dir  # noqa: F401 - a small static pipeline (8-d rows, Normalize)

TEXTS = ["A man is playing a guitar.", "hello world", "money", "A woman slices a cucumber on a board.",
         "The cat sat on the mat and looked at the dog for a long time.", "Two dogs run through the snow."]
CORPUS = [*TEXTS, "A plane is taking off.", "Someone is cutting vegetables in the kitchen.", "It rained all day.",
          "Stocks fell sharply after the announcement.", "The president spoke to reporters on Tuesday."]


@pytest.fixture(scope="module")
def minilm_st(minilm_backbone):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(MINILM, device="cpu")


def _pipeline(minilm_st, mode: str, *, include_prompt: bool = True, heads: bool = False, truncate: int | None = None):
    """all-MiniLM-L6-v2's transformer, then ``mode`` pooling, optionally two Dense layers (384 -> 256 Tanh, 256 ->
    128) and Normalize, seeded."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    modules = [minilm_st[0], models.Pooling(384, pooling_mode=mode, include_prompt=include_prompt)]
    if heads:
        modules += [models.Dense(384, 256, activation_function=torch.nn.Tanh()),
                    models.Dense(256, 128, activation_function=torch.nn.Identity()), models.Normalize()]
    return SentenceTransformer(modules=modules, device="cpu", truncate_dim=truncate)


def _raw_and_replayed(st, prompt: str = "") -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The pipeline's sentence vectors of TEXTS (as iso-bench's encode gives them), its pooled rows replayed
    through its own modules, and the pooled rows."""
    from iso_bench.backbones.base import EQUAL_LENGTH, in_input_order
    from iso_bench.backbones.pool_replay import replay
    from iso_bench.backbones.st_encode import PipelineEncoder

    runner = PipelineEncoder(st, "test", 256, EQUAL_LENGTH)
    out = in_input_order(len(TEXTS), ("sentence", "pool"), runner.stream(
        TEXTS, ("sentence", "pool"), None, 4, None, False, "", prompt, None))
    length = st[0]._get_prompt_length(prompt) if prompt else None
    return np.stack(out["sentence"]), replay(st, out["pool"], length), out["pool"]


@pytest.mark.parametrize(("mode", "heads", "truncate"), [
    ("mean", False, None), ("cls", False, None), ("max", False, None), ("weightedmean", False, None),
    ("lasttoken", False, None), ("mean_sqrt_len_tokens", False, None), ("mean", True, None), ("max", True, 64),
    ("cls", True, None)])
def test_the_pooling_and_head_replayed_on_the_pooled_rows_give_the_raw_vectors(minilm_st, mode, heads, truncate):
    st = _pipeline(minilm_st, mode, heads=heads, truncate=truncate)
    raw, replayed, rows = _raw_and_replayed(st)
    np.testing.assert_allclose(replayed, raw, rtol=1e-5, atol=1e-6)
    assert replayed.shape[1] == (truncate or (128 if heads else 384))
    tokens = [len(ids) for ids in st.tokenizer(TEXTS)["input_ids"]]  # [CLS] ... [SEP]
    # one row per text where the pooling reads one, else every token the model attends to (specials too)
    assert [len(r) for r in rows] == ([1] * len(TEXTS) if mode in ("cls", "lasttoken") else tokens)


@pytest.mark.parametrize("include_prompt", [True, False])
@pytest.mark.parametrize(("mode", "heads"), [("mean", False), ("cls", False), ("lasttoken", False),
                                             ("mean", True)])  # a prompt, its mean, Dense, Dense, Normalize
def test_a_prompt_is_pooled_as_the_pipeline_pools_it(minilm_st, mode: str, heads: bool, include_prompt: bool) -> None:
    st = _pipeline(minilm_st, mode, include_prompt=include_prompt, heads=heads)
    raw, replayed, rows = _raw_and_replayed(st, "query: ")
    np.testing.assert_allclose(replayed, raw, rtol=1e-5, atol=1e-6)
    plain = _raw_and_replayed(st)[0]
    assert np.abs(raw - plain).max() > 1e-3  # the prompt changes the vectors: it is read, or masked, as the model does


def test_the_row_a_single_row_pooling_reads_is_asked_of_the_pooling_module(minilm_st) -> None:
    from iso_bench.backbones.pool_replay import read_row

    # a text of 9 tokens, of which the first 3 are the prompt's ([CLS] query :)
    assert read_row(_pipeline(minilm_st, "cls"), 9, 3) == 0
    assert read_row(_pipeline(minilm_st, "cls", include_prompt=False), 9, 3) == 3
    assert read_row(_pipeline(minilm_st, "lasttoken", include_prompt=False), 9, 3) == 8
    assert read_row(_pipeline(minilm_st, "mean"), 9, 3) is None


def test_principal_coordinates_are_mapped_back_with_the_same_cosines() -> None:
    from iso_bench.methods import make_method

    X = np.random.default_rng(0).normal(size=(200, 6)) @ np.diag([5.0, 4, 3, 2, 1, 0.5])
    for spec in ("whiten-3", "whiten", "zipfian-whiten"):
        method = make_method(spec)[0].fit(X)
        Z, M = method.transform(X[:20]), method.model_coordinates(X[:20])
        assert M.shape == (20, 6)
        assert Z.shape[1] == (3 if spec == "whiten-3" else 6)
        np.testing.assert_allclose(M @ M.T, Z @ Z.T, atol=1e-9)  # an isometry: the same dot products
    zca = make_method("zca")[0].fit(X)
    np.testing.assert_array_equal(zca.model_coordinates(X[:5]), zca.transform(X[:5]))  # already in the model's


def test_a_method_outside_the_models_coordinates_is_refused_before_a_head() -> None:
    from types import SimpleNamespace

    from iso_bench.backbones.pool_replay import before_pooling
    from iso_bench.methods import MethodError, make_method

    flow = make_method("flow")[0]
    assert before_pooling(flow, "flow-level=token", SimpleNamespace(keeps_space=True)) == flow.transform
    with pytest.raises(MethodError, match="flow-level=token.*not in the model's coordinates.*-level=sentence"):
        before_pooling(flow, "flow-level=token", SimpleNamespace(keeps_space=False))
    whiten = make_method("whiten-4")[0]
    assert before_pooling(whiten, "whiten-4-level=token", SimpleNamespace(keeps_space=False)) == \
        whiten.model_coordinates
    pca = make_method("pca-4")[0]  # principal coordinates, 4 of them, with no map back: a head cannot read them
    with pytest.raises(MethodError, match="pca-4-level=token.*not in the model's coordinates"):
        before_pooling(pca, "pca-4-level=token", SimpleNamespace(keeps_space=False))


@pytest.fixture(scope="module")
def head_dir(tmp_path_factory, minilm_st) -> Path:
    """all-MiniLM-L6-v2 with max pooling, Dense(384 -> 256, Tanh), Dense(256 -> 128) and Normalize, saved."""
    folder = tmp_path_factory.mktemp("pool-replay") / "minilm-max-heads"
    _pipeline(minilm_st, "max", heads=True).save(str(folder))
    return folder


def _variant(store, spec: str, tmp_path: Path):
    from iso_bench.encoder import VariantEncoder

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    return VariantEncoder(store, spec, corpus=str(corpus))


def test_a_token_level_variant_of_a_pipeline_with_a_head_is_raw_where_it_changes_nothing(head_dir, tmp_path) -> None:
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    backbone = load_backbone(str(head_dir))
    store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens", "pool"), progress=False)
    raw = store.sentences(TEXTS)
    assert (backbone.dim, backbone.token_dim, backbone.keeps_space) == (128, 384, False)
    np.testing.assert_allclose(_variant(store, "raw-level=token", tmp_path).vectors(TEXTS, None), raw,
                               rtol=1e-5, atol=1e-6)
    for spec in ("whiten-8-level=token", "cluster-pca-1-1", "center-level=token"):  # raw's width, through the head
        Z = _variant(store, spec, tmp_path).vectors(TEXTS, None)
        assert Z.shape == (len(TEXTS), 128)
        np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, rtol=1e-5)  # the pipeline's Normalize ran
    # a word's vector has the token width (384), not the head's (128): word tasks run on such a model
    spans = store.spans(["A man is playing a guitar."], [(6, 13)])
    assert spans.shape == (1, 384)
    assert _variant(store, "center", tmp_path).word_vectors(["A man is playing a guitar."], [(6, 13)], None).shape \
        == (1, 384)


def test_raw_level_token_is_raw_on_minilm_and_on_isobenchs_own_extraction(minilm_backbone, tmp_path) -> None:
    from iso_bench.backbones.hf_backbone import Backbone, Extraction
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    backbones = [load_backbone(MINILM)]  # mteb's sentence-transformers wrapper: mean over [CLS] ... [SEP], Normalize
    backbones += [Backbone(MINILM, minilm_backbone.revision, device="cpu", extraction=Extraction(pooling=p, layer=3))
                  for p in ("mean", "cls", "last-token", "first-last-avg")]
    for backbone in backbones:
        store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens", "pool"), progress=False)
        raw = store.sentences(TEXTS)
        np.testing.assert_allclose(_variant(store, "raw-level=token", tmp_path).vectors(TEXTS, None), raw,
                                   rtol=1e-5, atol=1e-6, err_msg=str(backbone.describe()["extraction"]))


def test_a_decoders_last_token_is_replayed(tmp_path) -> None:
    from iso_bench.backbones.hf_backbone import Backbone, Extraction
    from iso_bench.vectors.store import EmbeddingStore
    from tests.decoder_helpers import make_decoder

    folder = make_decoder(tmp_path / "decoder")
    for pooling in ("last-token", "mean"):
        backbone = Backbone(str(folder), device="cpu", extraction=Extraction(pooling=pooling))
        store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens", "pool"), progress=False)
        rows = store.pool_rows(TEXTS)
        assert [len(r) for r in rows] == ([1] * len(TEXTS) if pooling == "last-token" else [len(t) for t in
                                                                                              store.tokens(TEXTS)])
        np.testing.assert_allclose(_variant(store, "raw-level=token", tmp_path).vectors(TEXTS, None),
                                   store.sentences(TEXTS), rtol=1e-5, atol=1e-6)


def test_an_old_cache_gets_the_pooled_rows_by_a_forward_pass_and_keeps_its_shards(minilm_backbone, tmp_path) -> None:
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    backbone = load_backbone(MINILM)
    old = EmbeddingStore(backbone, tmp_path / "cache", kinds=("sentence", "tokens"), progress=False)
    old.tokens(TEXTS)
    before = {p.name: p.stat().st_mtime_ns for p in old.folder.glob("*.npz")}
    assert {n.split("-")[0] for n in before} == {"sentence", "tokens"}
    new = EmbeddingStore(backbone, tmp_path / "cache", kinds=("sentence", "tokens", "pool"), progress=False)
    rows = new.pool_rows(TEXTS)
    assert new.stats["computed"] == len(TEXTS)  # one forward pass for the missing rows, never the text's own tokens
    after = {p.name: p.stat().st_mtime_ns for p in new.folder.glob("*.npz")}
    assert {k: v for k, v in after.items() if k in before} == before  # the old shards untouched
    assert {n.split("-")[0] for n in set(after) - set(before)} == {"pool"}
    own = new.tokens(TEXTS)
    assert [len(r) for r in rows] == [len(t) + 2 for t in own]  # [CLS] and [SEP] read by the mean pooling
    np.testing.assert_array_equal(rows[0][1:-1], own[0])


def test_token_level_variants_have_a_setup_of_their_own() -> None:
    from iso_bench.mteb_plugin import setup_kwargs

    assert setup_kwargs("cluster-pca") == {"fit_corpus": "task", "seed": 0, "token_pooling": "model"}
    assert setup_kwargs("raw-level=token") == {"token_pooling": "model"}
    assert setup_kwargs("raw") == {} and setup_kwargs("whiten") == {"fit_corpus": "task"}
    assert "token_pooling" not in setup_kwargs("zipfian-whiten-level=sentence")


def test_a_static_models_token_level_numbers_stay_where_it_adds_no_special_tokens(static_dir, tmp_path) -> None:  # noqa: F811
    """A static pipeline (tiny WordPiece, seeded 8-d rows, Normalize; no special tokens, no prompt): its
    EmbeddingBag's mean over every id is the mean of the text's own tokens, so the replay is raw, and a token-level
    method gives what the mean of its transformed token rows, normalised, gave before."""
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    texts = ["the cat sat on the mat", "a dog plays guitar", "the man is slicing a cucumber", "girl plays piano"]
    store = EmbeddingStore(load_backbone(str(static_dir)), None, kinds=("sentence", "tokens", "pool"), progress=False)
    np.testing.assert_allclose(_variant(store, "raw-level=token", tmp_path).vectors(texts, None),
                               store.sentences(texts), rtol=1e-5, atol=1e-6)
    variant = _variant(store, "center-level=token", tmp_path)
    method, tokens = variant.fitted_method(None), store.tokens(texts)
    before = method.transform_means(np.concatenate(tokens), np.cumsum([0, *(len(t) for t in tokens[:-1])]))
    before /= np.linalg.norm(before, axis=1, keepdims=True)
    np.testing.assert_allclose(variant.vectors(texts, None), before, rtol=1e-5, atol=1e-6)


def test_a_token_level_binary_stage_stores_the_pooled_sentence_vector(head_dir, tmp_path) -> None:
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.methods import storage_of
    from iso_bench.vectors.store import EmbeddingStore

    for backbone in (load_backbone(str(head_dir)), load_backbone(MINILM)):  # a head (128-d) and MiniLM's own
        store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens", "pool"), progress=False)
        signs = np.where(store.sentences(TEXTS) > 0, 1.0, -1.0)
        binary = _variant(store, "raw-level=token-precision=binary", tmp_path)
        np.testing.assert_array_equal(binary.vectors(TEXTS, None), signs)  # raw-precision=binary's vectors
        np.testing.assert_array_equal(_variant(store, "raw-precision=binary", tmp_path).vectors(TEXTS, None), signs)
        assert storage_of(binary.fitted_method(None), binary) == \
            {"precision": "binary", "dim": backbone.dim, "bytes": backbone.dim // 8}
        narrow = _variant(store, "whiten-8-level=token-precision=binary", tmp_path)  # 8 directions, on token rows
        assert narrow.vectors(TEXTS, None).shape[1] == backbone.dim  # stored: the model's pooled vector
        assert storage_of(narrow.fitted_method(None), narrow) == \
            {"precision": "binary", "dim": backbone.dim, "bytes": backbone.dim // 8}
        # the stage after the pooling and head: the sign of the fitted method's sentence vector, not of its rows
        Z = _variant(store, "center-level=token", tmp_path).vectors(TEXTS, None)
        staged = _variant(store, "center-level=token-precision=binary", tmp_path)
        np.testing.assert_array_equal(staged.vectors(TEXTS, None), np.where(Z > 0, 1.0, -1.0))
        # a word task stores the target word's span vector with the stage: the sign of the method's span vector
        words, spans = ["A man is playing a guitar."], [(6, 13)]
        W = _variant(store, "center-level=token", tmp_path).word_vectors(words, spans, None)
        np.testing.assert_array_equal(staged.word_vectors(words, spans, None), np.where(W > 0, 1.0, -1.0))


def test_a_token_level_int8_stage_is_calibrated_on_the_fit_corpus_pooled_vectors(minilm_backbone, tmp_path,
                                                                                   monkeypatch) -> None:
    """``raw-level=token-precision=int8`` stores raw-precision=int8's codes: both calibrate on the fit corpus's pooled
    vectors, which the token-level fit reads through the model's pooling and nothing else; saved with the fit."""
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.encoder import VariantEncoder
    from iso_bench.methods import storage_of
    from iso_bench.vectors.store import EmbeddingStore

    store = EmbeddingStore(load_backbone(MINILM), tmp_path / "cache", kinds=("sentence", "tokens", "pool"),
                           progress=False)
    held_out = tmp_path / "held-out.txt"
    held_out.write_text("\n".join(CORPUS[len(TEXTS):]) + "\n")  # no text that the variant then encodes
    read, pool_rows = [], store.pool_rows
    monkeypatch.setattr(store, "pool_rows", lambda texts, *a, **k: read.extend(texts) or pool_rows(texts, *a, **k))
    token = VariantEncoder(store, "raw-level=token-precision=int8", corpus=str(held_out))
    fitted = token.fitted_method(None)
    assert sorted(read) == sorted(CORPUS[len(TEXTS):])  # the fit corpus's pooled rows, nothing else
    raw = store.sentences(CORPUS[len(TEXTS):])
    np.testing.assert_allclose(fitted.ranges_, np.vstack((raw.min(axis=0), raw.max(axis=0))), atol=1e-6)
    sentence = VariantEncoder(store, "raw-precision=int8", corpus=str(held_out))
    codes = token.vectors(TEXTS, None)
    np.testing.assert_array_equal(codes, sentence.vectors(TEXTS, None))  # the same codes: the same scores
    assert codes.min() >= -128 and codes.max() <= 127 and (codes == -128).any()  # clipped outside the fit corpus
    sha = storage_of(fitted, token)["calibration"]["ranges_sha256"]
    assert sha == sentence.fitted_method(None).ranges_sha256_
    assert token.fit_records[f"file:{held_out}"]["fits"][0]["learned"]["ranges_sha256_"] == sha
    # the fit cache holds the ranges under a key of its own; a second variant loads them and fits nothing
    assert token._fit_key(token.corpus(None), "token", fitted)["calibration"] == "pooled"
    again = VariantEncoder(store, "raw-level=token-precision=int8", corpus=str(held_out))
    assert again.fitted_method(None).ranges_sha256_ == sha and (again.fits_run, again.fits_loaded) == (0, 1)
    # a word task: the span vector stored with the token vectors' ranges, as the sentence-level spec stores it
    words, spans = ["A man is playing a guitar."], [(6, 13)]
    np.testing.assert_array_equal(token.word_vectors(words, spans, None), sentence.word_vectors(words, spans, None))
