"""An affine method at token level runs after the model's pooling where that pooling averages the rows it reads:
``T(sum_i w_i x_i) = sum_i w_i T(x_i)`` when ``sum_i w_i = 1``, so one vector per text is transformed instead of its
rows, and the vectors are those of the rows transformed, up to rounding. Other methods and poolings transform the
rows, and a text's vector never depends on how many texts came with it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_pool_replay import CORPUS, TEXTS, _pipeline, _raw_and_replayed, _variant, minilm_st  # noqa: F401


def _fitted(spec: str, rows: list[np.ndarray]):
    from iso_bench.methods import make_method

    return make_method(spec)[0].fit(np.concatenate(rows, axis=0).astype(np.float64))


@pytest.mark.parametrize(("mode", "heads", "prompt"), [
    ("mean", False, ""), ("mean", True, ""), ("cls", True, ""), ("lasttoken", False, ""), ("weightedmean", True, ""),
    ("mean", True, "query: ")])
def test_an_affine_map_after_an_average_pooling_is_the_map_of_the_rows(minilm_st, mode, heads, prompt) -> None:  # noqa: F811
    from iso_bench.backbones.pool_replay import before_pooling, pools_by_average, replay

    st = _pipeline(minilm_st, mode, heads=heads, include_prompt=not prompt)
    assert pools_by_average(st)
    _, _, rows = _raw_and_replayed(st, prompt)
    length = st[0]._get_prompt_length(prompt) if prompt else None
    for spec in ("center", "whiten-8", "abtt-2", "zscore", "zca-eps=0.01"):
        method = _fitted(spec, rows if mode not in ("cls", "lasttoken") else [np.random.default_rng(0).normal(
            size=(40, 384))])
        transform = before_pooling(method, spec, None)
        of_rows = replay(st, [transform(r) for r in rows], length)
        after = replay(st, rows, length, between=transform)
        assert after.shape == of_rows.shape
        np.testing.assert_allclose(after, of_rows, rtol=2e-5, atol=2e-6, err_msg=f"{mode} {heads} {spec}")


@pytest.mark.parametrize("mode", ["max", "mean_sqrt_len_tokens"])
def test_a_pooling_that_does_not_average_is_not_pooled_first(minilm_st, mode) -> None:  # noqa: F811
    from iso_bench.backbones.pool_replay import pools_by_average

    assert not pools_by_average(_pipeline(minilm_st, mode))


def test_which_methods_run_after_the_pooling() -> None:
    from iso_bench.backbones.pool_replay import pools_first
    from iso_bench.methods import make_method

    class Averages:
        pools_by_average = True

    X = np.random.default_rng(1).normal(size=(50, 6)) + 3.0
    first = {spec: pools_first(make_method(spec)[0].fit(X), Averages()) for spec in
             ("raw", "center", "whiten", "zipfian-whiten", "abtt-1", "zscore", "softdecay",
              "whiten-precision=int8", "cluster-pca-2-1", "flow-max_steps=2", "mean-proj")}
    assert first == {"raw": True, "center": True, "whiten": True, "zipfian-whiten": True,
                     "abtt-1": True, "zscore": True, "softdecay": True, "whiten-precision=int8": True,
                     "cluster-pca-2-1": False, "flow-max_steps=2": False, "mean-proj": False}

    class Maxes:
        pools_by_average = False

    assert not pools_first(make_method("center")[0].fit(X), Maxes())


def _both_ways(store, spec: str, tmp_path, monkeypatch, texts=TEXTS) -> tuple[np.ndarray, np.ndarray]:
    """A variant's vectors pooled first, and the same variant's vectors of its rows transformed."""
    import iso_bench.backbones.pool_replay as replay_module

    variant = _variant(store, spec, tmp_path)
    first = variant.vectors(texts, None)
    monkeypatch.setattr(replay_module, "pools_first", lambda *_: False)
    rows = variant.vectors(texts, None)
    monkeypatch.undo()
    return first, rows


def test_a_variant_pools_first_on_mtebs_wrapper_and_on_isobenchs_own_extraction(minilm_backbone, tmp_path,
                                                                                monkeypatch) -> None:
    from iso_bench.backbones.hf_backbone import Backbone, Extraction
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    backbones = [load_backbone(MINILM_ID)]
    backbones += [Backbone(MINILM_ID, minilm_backbone.revision, device="cpu", extraction=Extraction(pooling=p, layer=3))
                  for p in ("mean", "cls", "first-last-avg")]
    for backbone in backbones:
        assert backbone.pools_by_average
        store = EmbeddingStore(backbone, None, kinds=("sentence", "tokens", "pool"), progress=False)
        for spec in ("zipfian-whiten-eps=0.001", "center-level=token"):
            first, rows = _both_ways(store, spec, tmp_path, monkeypatch)
            one_row = backbone.describe()["extraction"].get("pooling") == "cls"  # the pooled row is the row
            assert np.array_equal(first, rows) == one_row  # two computations (one where a text has one row) ...
            np.testing.assert_allclose(first, rows, rtol=1e-5, atol=1e-5,  # ... of the same vectors (norms 1-10)
                                       err_msg=f"{spec} {backbone.describe()['extraction']}")


def test_a_texts_vector_does_not_depend_on_the_texts_beside_it(minilm_backbone, tmp_path) -> None:
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.vectors.store import EmbeddingStore

    store = EmbeddingStore(load_backbone(MINILM_ID), None, kinds=("sentence", "tokens", "pool"), progress=False)
    for spec in ("zipfian-whiten-eps=0.001", "whiten-8"):  # pooled first at token level; a sentence-level product
        variant = _variant(store, spec, tmp_path)
        together = variant.vectors(TEXTS, None)
        for i, text in enumerate(TEXTS[:3]):  # one text alone: multiplied as in a product of many rows
            assert variant.vectors([text], None).tobytes() == together[i:i + 1].tobytes(), (spec, text)


MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
