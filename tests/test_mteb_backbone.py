"""Raw vectors from mteb's own implementation of a model: the raw variant is the model MTEB evaluates.

A prompted twin of all-MiniLM-L6-v2 is registered with mteb here, under a new name. Its implementation adds
``"query: "`` to queries and STS texts and ``"passage: "`` to documents. mteb's STS tasks encode with no
prompt type, so the task-type key ``"STS"`` is what makes STS differ from the unprompted model. A tiny
custom encoder with no hidden states stands for an API model.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

mteb = pytest.importorskip("mteb")
datasets = pytest.importorskip("datasets")

from mteb.models.abs_encoder import AbsEncoder  # noqa: E402

from iso_bench.backbones.base import plan_batches  # noqa: E402
from iso_bench.backbones.hf_backbone import Backbone  # noqa: E402
from iso_bench.backbones.loader import load_backbone  # noqa: E402
from iso_bench.backbones.mteb_backbone import MtebBackbone, TokenVectorsUnavailable, mteb_meta  # noqa: E402
from iso_bench.registry import IsoBenchError  # noqa: E402
from iso_bench.vectors.store import EmbeddingStore, text_key  # noqa: E402
from tests.conftest import MINILM, _missing  # noqa: E402

MINILM_REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
PROMPTED = "iso-bench-test/minilm-prompted"
PROMPTS = {"query": "query: ", "document": "passage: ", "STS": "query: "}
FIXED = "iso-bench-test/fixed-vectors"
UNPROMPTED_STSB = 0.8203247  # MTEB's published score of the unprompted model (tests/test_integration.py)


# ---- models registered with mteb for these tests ---------------------------------------------------------
def _load_prompted(name: str, revision: str | None = None, **kwargs):
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    return SentenceTransformerEncoderWrapper(MINILM, revision=revision, **kwargs)


class FixedEncoder(AbsEncoder):
    """An encoder with no hidden states (like an API model): a text's vector is derived from its SHA-256,
    and the prompt type is added to the last coordinate, so a query and a document of one text differ.
    It records every call."""

    calls: list[tuple[str, str | None, list[str]]] = []

    def __init__(self, name: str, revision: str | None = None, **_) -> None:
        self.name = name

    @staticmethod
    def vector(text: str, prompt_type: str | None = None) -> np.ndarray:
        v = np.frombuffer(hashlib.sha256(text.encode()).digest()[:8], np.uint8).astype(np.float32) - 127.5
        v[-1] += {"query": 1000.0, "document": 2000.0}.get(prompt_type, 0.0)
        return v

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        texts = [t for batch in inputs for t in batch["text"]]
        kind = prompt_type.value if prompt_type is not None else None
        FixedEncoder.calls.append((task_metadata.name, kind, texts))
        return np.stack([self.vector(t, kind) for t in texts])


@pytest.fixture(scope="module")
def registered():
    """Register the prompted twin of all-MiniLM-L6-v2 and the fixed-vector encoder with mteb."""
    from mteb.models.model_implementations import MODEL_REGISTRY
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    base = MODEL_REGISTRY[MINILM]
    MODEL_REGISTRY[PROMPTED] = base.model_copy(update={
        "name": PROMPTED, "loader": _load_prompted, "loader_kwargs": {"model_prompts": PROMPTS},
        "use_instructions": True})
    MODEL_REGISTRY[FIXED] = ModelMeta.create_empty({
        "name": FIXED, "revision": "r1", "loader": FixedEncoder, "embed_dim": 8,
        "similarity_fn_name": ScoringFunction.COSINE})
    yield
    for name in (PROMPTED, FIXED):
        MODEL_REGISTRY.pop(name, None)


@pytest.fixture(scope="module")
def prompted(registered) -> MtebBackbone:
    try:
        backbone = load_backbone(PROMPTED, device="cpu")
    except IsoBenchError as exc:
        _missing(f"{MINILM} ({exc})")
    assert isinstance(backbone, MtebBackbone)
    return backbone


def _evaluate(model, task) -> float:
    (result,) = mteb.evaluate(model, task, cache=None, show_progress_bar=False).task_results
    return result.get_score()


def _raw_variant(backbone, cache_dir, kinds=("sentence",)):
    from iso_bench.encoder import VariantEncoder

    return VariantEncoder(EmbeddingStore(backbone, cache_dir, kinds=kinds, progress=False), "raw")


# ---- which backbone, no model loaded ---------------------------------------------------------------------
def test_mteb_knows_registered_models_but_not_variants_other_revisions_or_folders(registered, tmp_path) -> None:
    assert mteb_meta(MINILM).revision == MINILM_REVISION
    assert mteb_meta(MINILM, MINILM_REVISION) is not None
    assert mteb_meta(MINILM, "0" * 40) is None  # another revision is not mteb's implementation
    assert mteb_meta(f"{MINILM}+whiten") is None  # an iso-bench variant
    assert mteb_meta("iso-bench-test/no-such-model") is None
    assert mteb_meta(str(tmp_path)) is None
    assert mteb_meta(PROMPTED).loader_kwargs == {"model_prompts": PROMPTS}


@pytest.mark.slow
def test_asking_for_pooling_or_layer_uses_the_hf_backbone_at_mtebs_revision() -> None:
    try:
        backbone = load_backbone(MINILM, device="cpu", layer=3)
    except IsoBenchError as exc:
        _missing(f"{MINILM} ({exc})")
    assert isinstance(backbone, Backbone) and backbone.describe()["vectors"] == "hf"
    assert backbone.revision == MINILM_REVISION
    assert (backbone.extraction.pooling, backbone.extraction.layer, backbone.extraction.normalize) == ("mean", 3, True)
    every_layer = load_backbone(MINILM, device="cpu", hidden_states=True)  # an analysis over all layers
    assert isinstance(every_layer, Backbone) and every_layer.extraction.layer == -1


# ---- a model with no hidden states -----------------------------------------------------------------------
def test_a_model_without_hidden_states_gives_sentence_vectors_only(registered) -> None:
    from mteb.types import PromptType

    backbone = load_backbone(FIXED)
    assert isinstance(backbone, MtebBackbone) and backbone.kinds == ("sentence",)
    assert backbone.describe()["vectors"] == "mteb" and backbone.dim == 8  # measured on one text, not declared
    assert FixedEncoder.calls[-1] == ("iso-bench/no-task", None, ["dimension"])
    before = len(FixedEncoder.calls)
    # a store that also wants tokens still serves sentences: tokens are computed only when asked for
    store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens"), progress=False)
    sts = mteb.get_task("STSBenchmark").metadata
    np.testing.assert_array_equal(store.sentences(["a cat", "a dog"], task_metadata=sts),
                                  [FixedEncoder.vector("a cat"), FixedEncoder.vector("a dog")])
    query = store.sentences(["a cat"], task_metadata=sts, prompt_type=PromptType.query)
    np.testing.assert_array_equal(query[0], FixedEncoder.vector("a cat", "query"))
    assert FixedEncoder.calls[-2:] == [("STSBenchmark", None, ["a cat", "a dog"]), ("STSBenchmark", "query", ["a cat"])]
    store.sentences(["a dog", "a cat"], task_metadata=sts)
    assert len(FixedEncoder.calls) == before + 2 and store.stats["computed"] == 3  # cached per task and prompt type
    with pytest.raises(TokenVectorsUnavailable) as caught:
        store.tokens(["a cat"], task_metadata=sts)
    message = str(caught.value)
    assert isinstance(caught.value, IsoBenchError) and FIXED in message
    assert "cluster-pca" in message and "-level=token" in message and "hidden states" in message
    with pytest.raises(TokenVectorsUnavailable):
        store.spans(["a cat"], [(2, 5)])


def test_raw_variant_of_a_model_without_hidden_states_equals_mteb(registered) -> None:
    pairs = {"sentence1": ["a cat sat", "a dog ran", "the sun", "rain falls", "blue sky"],
             "sentence2": ["a cat sits", "dogs run", "the moon", "snow falls", "grey sky"],
             "score": [4.5, 3.0, 2.0, 1.5, 1.0]}

    def task():
        sts = mteb.get_task("STSBenchmark")
        sts.dataset, sts.data_loaded = datasets.DatasetDict({"test": datasets.Dataset.from_dict(pairs)}), True
        return sts

    expected = _evaluate(mteb.get_model(FIXED), task())
    assert _evaluate(_raw_variant(load_backbone(FIXED), None), task()) == pytest.approx(expected, abs=1e-12)


# ---- the prompted twin of all-MiniLM-L6-v2 -----------------------------------------------------------------
@pytest.mark.slow
def test_prompts_are_resolved_as_mtebs_wrapper_resolves_them(prompted) -> None:
    from mteb.types import PromptType

    sts, scifact = mteb.get_task("STSBenchmark").metadata, mteb.get_task("SciFact").metadata
    assert prompted.prompt_context(sts, None) == "query: "  # the task type "STS"
    assert prompted.prompt_context(scifact, PromptType.query) == "query: "
    assert prompted.prompt_context(scifact, PromptType.document) == "passage: "
    assert prompted.prompt_context(mteb.get_task("Banking77Classification").metadata, None) is None
    assert prompted.prompt_context() is None  # no task: the model's own prompts ('' here) only
    extraction = prompted.describe()["extraction"]
    assert extraction["prompts"] == PROMPTS and extraction["vectors"] == "mteb"
    assert extraction["normalize"] is True and extraction["max_length"] == 256
    text = "A man is playing a guitar."
    store = EmbeddingStore(prompted, None, progress=False)
    np.testing.assert_allclose(store.sentences([text], task_metadata=sts)[0],
                               prompted.st.encode("query: " + text), atol=1e-6)


@pytest.mark.slow
def test_prompted_raw_variant_equals_mteb_on_stsbenchmark(prompted, hub_mirror, tmp_path) -> None:
    from iso_bench.data.sources import get_task

    expected = _evaluate(mteb.get_model(PROMPTED), get_task("STSBenchmark", hub_mirror))
    variant = _raw_variant(prompted, tmp_path)
    got = _evaluate(variant, get_task("STSBenchmark", hub_mirror))
    print(f"STSBenchmark: prompted raw variant {got:.7f}, mteb {expected:.7f}, unprompted {UNPROMPTED_STSB}")
    assert got == pytest.approx(expected, abs=1e-6)
    assert abs(got - UNPROMPTED_STSB) > 5e-4  # the prompt changed the score: this test can fail
    # the cache holds the "query: " versions of the texts, under keys that include the prompt
    text = get_task("STSBenchmark", hub_mirror).dataset["test"]["sentence1"][0]
    table = variant.store.held("sentence", [text_key(text, context="query: "), text_key(text)])
    assert text_key(text, context="query: ") in table and text_key(text) not in table


def _small_scifact(hub_mirror, n_queries: int = 16, n_distractors: int = 100):
    """SciFact restricted to a few judged queries, their relevant documents and some other documents."""
    from iso_bench.data.sources import get_task

    full = get_task("SciFact", hub_mirror)
    full.load_data()
    split = full.dataset["default"]["test"]
    qids = [q for q in split["queries"]["id"] if split["relevant_docs"].get(q)][:n_queries]
    relevant = {d for q in qids for d in split["relevant_docs"][q]}
    docs = relevant | set(split["corpus"]["id"][:n_distractors])
    small = {"queries": split["queries"].filter(lambda row: row["id"] in qids),
             "corpus": split["corpus"].filter(lambda row: row["id"] in docs),
             "relevant_docs": {q: split["relevant_docs"][q] for q in qids}, "top_ranked": None}

    def make():
        task = mteb.get_task("SciFact")
        task.metadata = full.metadata
        task.dataset, task.data_loaded = {"default": {"test": dict(small)}}, True
        return task

    return make, small


@pytest.mark.slow
def test_prompted_raw_variant_equals_mteb_on_a_small_retrieval_task(prompted, hub_mirror, tmp_path) -> None:
    from mteb._create_dataloaders import _retrieval_texts
    from mteb.types import PromptType

    make, small = _small_scifact(hub_mirror)
    expected = _evaluate(mteb.get_model(PROMPTED), make())
    variant = _raw_variant(prompted, tmp_path)
    got = _evaluate(variant, make())
    print(f"small SciFact ({len(small['queries'])} queries, {len(small['corpus'])} documents): "
          f"prompted raw variant {got:.7f}, mteb {expected:.7f}")
    assert got == pytest.approx(expected, abs=1e-6) and got < 1.0  # some relevant document is not ranked first
    # queries were encoded with "query: ", documents with "passage: ", each once and under its own key
    queries = list(_retrieval_texts(small["queries"], PromptType.query))
    documents = list(_retrieval_texts(small["corpus"], PromptType.document))
    table = variant.store.held("sentence", [text_key(t, context=c) for t in queries + documents
                                            for c in ("query: ", "passage: ", None)])
    assert all(text_key(q, context="query: ") in table for q in queries)
    assert all(text_key(d, context="passage: ") in table for d in documents)
    assert not any(text_key(t) in table for t in queries + documents)
    np.testing.assert_allclose(table[text_key(queries[0], context="query: ")],
                               prompted.st.encode("query: " + queries[0]), atol=1e-6)
    np.testing.assert_allclose(table[text_key(documents[0], context="passage: ")],
                               prompted.st.encode("passage: " + documents[0]), atol=1e-6)


# ---- one forward pass for sentence and token vectors --------------------------------------------------------
@pytest.fixture(scope="module")
def mteb_minilm() -> MtebBackbone:
    try:
        backbone = load_backbone(MINILM, device="cpu")
    except IsoBenchError as exc:
        _missing(f"{MINILM} ({exc})")
    assert isinstance(backbone, MtebBackbone) and backbone.describe()["vectors"] == "mteb"
    return backbone


@pytest.mark.slow
def test_sentence_and_token_vectors_come_from_one_forward_pass(mteb_minilm, tmp_path, monkeypatch) -> None:
    transformer = mteb_minilm.st[0]
    seen: list[int] = []
    forward = transformer.forward

    def counting(features, *args, **kwargs):
        seen.append(int(features["input_ids"].shape[0]))
        return forward(features, *args, **kwargs)

    monkeypatch.setattr(transformer, "forward", counting)
    texts = ["a cat sat on the mat", "the river bank", "a man plays the guitar", "unbelievable!", "two dogs"]
    store = EmbeddingStore(mteb_minilm, tmp_path, kinds=("sentence", "tokens"), batch_size=2, progress=False)
    X = store.sentences(texts)
    toks = store.tokens(texts)
    lengths = [int(n) for n in mteb_minilm.st.tokenize(texts)["attention_mask"].sum(1)]
    passes = len(plan_batches(lengths, 2))  # texts of one length together; a pass of few rows filled with copies
    # every text went through the network in one planned pass, for both kinds
    assert len(seen) == passes and sum(seen) >= len(texts)
    store.sentences(texts)
    store.tokens(list(reversed(texts)))
    EmbeddingStore(mteb_minilm, tmp_path, kinds=("sentence", "tokens"), progress=False).tokens(texts)
    assert len(seen) == passes  # a second request, even from a new store on the same disk cache, runs none
    np.testing.assert_allclose(X, mteb_minilm.st.encode(texts), atol=1e-6)
    assert X.shape == (5, 384) and toks[1].shape == (3, 384)  # "the river bank": 3 tokens, no [CLS] or [SEP]


@pytest.mark.slow
def test_token_and_span_vectors_match_the_hf_backbone(mteb_minilm, minilm_backbone) -> None:
    """Without a prompt, mteb's implementation of all-MiniLM-L6-v2 runs the same network as the HF backbone:
    the same token vectors (special tokens dropped) and the same span means."""
    texts = ["the cat was unbelievable !", "a man plays a guitar"]
    spans = [[(12, 24), (4, 7)], [(15, 21)]]
    ours = mteb_minilm.encode(texts, kinds=("sentence", "tokens", "span"), spans=spans, progress=False)
    theirs = minilm_backbone.encode(texts, kinds=("sentence", "tokens", "span"), spans=spans, progress=False)
    for kind in ("sentence", "tokens", "span"):
        for a, b in zip(ours[kind], theirs[kind], strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.slow
def test_prompt_tokens_are_not_token_vectors_and_spans_shift_past_the_prompt(prompted) -> None:
    import torch

    sts = mteb.get_task("STSBenchmark").metadata
    text = "the cat was unbelievable !"
    out = prompted.encode([text], kinds=("sentence", "tokens", "span"), spans=[[(4, 7)]], task_metadata=sts,
                          progress=False)
    enc = prompted.st.tokenizer("query: " + text, return_tensors="pt")
    with torch.inference_mode():
        hidden = prompted.st[0].model(**enc).last_hidden_state[0].numpy()  # the BERT inside
    # [CLS] query : the cat was un ##believ ##able ! [SEP] -> the text's own tokens are 3..-1
    np.testing.assert_allclose(out["tokens"][0], hidden[3:-1], atol=1e-5)
    np.testing.assert_allclose(out["span"][0][0], hidden[4], atol=1e-5)  # "cat"


@pytest.mark.slow
def test_token_types_are_the_tokenizer_ids_of_the_token_vectors_past_the_prompt(prompted, minilm_backbone) -> None:
    """zipfian-whiten counts token types: one id per token vector, the prompt's and special tokens left out,
    in both backbones (mteb's, with a prompt, and the plain Hugging Face one)."""
    sts = mteb.get_task("STSBenchmark").metadata
    texts = ["the cat was unbelievable !", "a", "the river bank"]
    ids = prompted.token_ids(texts, task_metadata=sts)
    toks = prompted.encode(texts, kinds=("tokens",), task_metadata=sts, progress=False)["tokens"]
    words = [prompted.st.tokenizer.tokenize(t) for t in texts]  # the text alone: no prompt, no special tokens
    assert [len(i) for i in ids] == [len(t) for t in toks] == [len(w) for w in words]
    assert [prompted.st.tokenizer.convert_ids_to_tokens(i.tolist()) for i in ids] == words
    plain = minilm_backbone.token_ids(texts)
    assert [a.tolist() for a in plain] == [a.tolist() for a in ids]  # no prompt there: the same ids
    assert [len(t) for t in minilm_backbone.encode(texts, kinds=("tokens",), progress=False)["tokens"]] == [
        len(w) for w in words]


def test_a_batchs_token_vectors_are_views_of_one_block() -> None:
    from iso_bench.backbones.pipeline import views as _views

    arrays = [np.arange(6.0, dtype=np.float32).reshape(3, 2), np.zeros((0, 2), np.float32), np.ones((1, 2), np.float32)]
    views = _views(arrays)
    assert [v.shape for v in views] == [(3, 2), (0, 2), (1, 2)]
    for view, array in zip(views, arrays, strict=True):
        np.testing.assert_array_equal(view, array)
    assert views[0].base is views[2].base is not None  # one allocation, kept as long as any of its texts
    assert _views([]) == []
