"""Storage stages (``-precision=int8``, ``-precision=binary``) after any method, and the dimension cuts ``truncate-k``
and ``pca-k``: scored as a deployment stores them, calibrated on the fit corpus alone, refused before any work where
they cannot be built."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from iso_bench.methods import MethodError, canonical_spec, make_method, storage_of, storage_record
from iso_bench.methods.base import NotFittedError
from iso_bench.methods.contract import anisotropic
from iso_bench.vectors.fit_cache import load_fit, save_fit
from tests.conftest import MINILM
from tests.test_export import static_dir  # noqa: F401 - a small static pipeline (8-d rows, Normalize)


def _quantize(*args, **kwargs):
    from sentence_transformers.util.quantization import quantize_embeddings

    return quantize_embeddings(*args, **kwargs)


def test_binary_scores_are_an_affine_image_of_the_hamming_distance_and_rank_as_it_does(keyword_variant) -> None:
    from mteb.similarity_functions import pairwise_cos_sim

    X = anisotropic(n=400, d=24)
    staged = make_method("whiten-precision=binary")[0].fit(X)
    A, B = staged.transform(X[:200]).astype(np.float32), staged.transform(X[200:]).astype(np.float32)  # as encoded
    assert set(np.unique(A)) == {-1.0, 1.0}
    # the Hamming distance of the sign bits of the method's own vectors, counted by hand
    plain = make_method("whiten")[0].fit(X)
    hamming = ((plain.transform(X[:200]) > 0) != (plain.transform(X[200:]) > 0)).sum(axis=1)
    variant = keyword_variant([f"w{i}" for i in range(24)], "whiten-precision=binary")  # scores as mteb asks it
    scores = variant.similarity_pairwise(A, B).numpy()
    np.testing.assert_array_equal(scores, (1 - 2 * hamming / 24).astype(np.float32))
    # equal distances score equal (ties fall alike), and the order is the Hamming order exactly
    assert len(np.unique(scores)) == len(np.unique(hamming)) < 25
    np.testing.assert_array_equal(np.argsort(-scores, kind="stable"), np.argsort(hamming, kind="stable"))
    matrix = variant.similarity(A[:5], B).numpy()
    np.testing.assert_array_equal(np.diag(matrix[:, :5]), scores[:5])
    # float32 cosine (mteb's own) is close, but splits equal distances by a rounding: why the stage scores exactly
    cosine = np.asarray(pairwise_cos_sim(A, B))
    np.testing.assert_allclose(cosine, scores, atol=1e-6)
    # a variant without a binary stage scores with plain cosine
    assert keyword_variant(["a", "b"], "whiten").similarity_pairwise(A, B).numpy().tolist() == cosine.tolist()


def test_binary_codes_are_sentence_transformers_packed_bits() -> None:
    X = anisotropic(n=50, d=20)
    Z = make_method("center")[0].fit(X).transform(X)
    signs = make_method("center-precision=binary")[0].fit(X).transform(X)
    packed = _quantize(Z, precision="ubinary")  # 3 bytes per 20-d vector
    assert packed.shape == (50, 3)
    np.testing.assert_array_equal(np.packbits(signs > 0, axis=1), packed)


def test_int8_ranges_are_calibrated_on_the_fit_vectors_alone() -> None:
    fit, test = anisotropic(n=500, d=16), anisotropic(n=60, d=16, seed=1) * 3.0  # test vectors beyond the range
    staged = make_method("whiten-precision=int8")[0].fit(fit)
    plain = make_method("whiten")[0].fit(fit)
    Zfit = plain.transform(fit)
    np.testing.assert_array_equal(staged.ranges_, np.vstack((Zfit.min(0), Zfit.max(0))).astype(np.float32))
    before = staged.ranges_.copy()
    codes = staged.transform(test)
    np.testing.assert_array_equal(staged.ranges_, before)  # transforming never recalibrates
    # sentence-transformers' own int8 codes of the test vectors, calibrated on the fit vectors
    reference = _quantize(plain.transform(test), precision="int8", calibration_embeddings=Zfit)
    np.testing.assert_array_equal(codes, reference.astype(np.float64))
    assert codes.min() == -128 and codes.max() == 127  # the out-of-range values clipped, not wrapped around
    # the fit vectors' own extremes are the ends of the scale: 0 -> -128 (the max lands in the last bucket or below)
    assert (staged.transform(fit).min(axis=0) == -128).all()


def test_an_int8_stage_makes_raw_a_fitted_variant_and_streams_where_its_method_does() -> None:
    raw8, level = make_method("raw-precision=int8")
    assert level == "sentence" and type(raw8).fitted and not raw8.streaming()
    assert not type(make_method("raw-precision=binary")[0]).fitted and not type(make_method("raw")[0]).fitted
    assert make_method("whiten-precision=binary")[0].streaming()  # the sign needs no calibration: whiten streams
    assert make_method("whiten-precision=int8")[0].streaming()
    assert make_method("zipfian-whiten-precision=int8")[0].streaming()
    assert not make_method("cluster-pca-precision=int8")[0].streaming()  # as cluster-pca itself
    with pytest.raises(MethodError, match="fits on all of its vectors at once"):
        raw8.partial_fit(anisotropic(n=10, d=8))
    with pytest.raises(MethodError, match="not fitted"):
        raw8.transform(np.ones((2, 3)))


def test_a_streamed_int8_fit_is_its_methods_streamed_fit_with_the_ranges_of_its_transformed_batches() -> None:
    """partial_fit on batches, then the ranges a batch at a time: the method's state is that of the plain
    method streamed on the same batches (bit for bit), and the ranges are each dimension's minimum and maximum
    of that method's transform of every fit vector (float32, as sentence-transformers keeps them)."""
    X = anisotropic(n=900, d=10)
    batches = [X[:1], X[1:350], X[350:900]]
    staged, plain = make_method("whiten-4-precision=int8")[0], make_method("whiten-4")[0]
    for b in batches:
        staged.partial_fit(b)
        plain.partial_fit(b)
    staged.finalize()
    staged.calibrate_batches(iter(batches))
    np.testing.assert_array_equal(staged.W_, plain.finalize().W_)
    Z = np.vstack([plain.transform(b) for b in batches])
    np.testing.assert_array_equal(staged.ranges_, np.vstack((Z.min(axis=0), Z.max(axis=0))).astype(np.float32))
    codes = staged.transform(X)
    assert codes.min() == -128 and codes.max() <= 127 and (codes.min(axis=0) == -128).all()
    with pytest.raises(NotFittedError, match="no fit vectors"):
        make_method("whiten-4-precision=int8")[0].calibrate_batches(iter([]))


def test_specs_name_the_stage_after_the_method_parameters() -> None:
    assert canonical_spec("whiten-n_components=256-precision=binary") == "whiten-256-precision=binary"
    assert canonical_spec("whiten-precision=int8-eps=0.1") == "whiten-eps=0.1-precision=int8"
    method = make_method("pca-128-precision=int8")[0]
    assert method.name == "pca" and method.get_params() == {"n_components": 128, "precision": "int8"}
    again = make_method(method.spec)[0]
    assert type(again) is type(method) and again.get_params() == method.get_params()
    assert method.affine() is None  # quantized vectors are no affine map


def test_a_staged_fit_pickles_and_goes_through_the_fit_cache(tmp_path: Path) -> None:
    X = anisotropic(n=300, d=12)
    fitted = make_method("whiten-6-precision=int8")[0].fit(X)
    expected = fitted.transform(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).transform(X), expected)
    assert save_fit(tmp_path / "f.npz", {"k": 1}, fitted, {"level": "sentence", "n_vectors": 300})
    loaded, _ = load_fit(tmp_path / "f.npz", {"k": 1}, make_method("whiten-6-precision=int8")[0])
    assert loaded.ranges_sha256_ == fitted.ranges_sha256_
    np.testing.assert_array_equal(loaded.transform(X), expected)


@pytest.mark.parametrize(("spec", "dim", "message"), [
    ("whiten-precision=float16", None, "precision must be 'int8' or 'binary', got 'float16'"),
    ("truncate-0-precision=binary", None, "truncate_dim must be at least 1"),
    ("pca-0", None, "n_components must be at least 1"),
    ("pca-400", 384, "n_components must be between 1 and 384 for 384-d vectors, got 400"),
    ("truncate-400-precision=int8", 384, "truncate_dim must be between 1 and 384"),
    ("cluster-pca-0-precision=int8", None, "n_clusters must be at least 1"),
])
def test_specs_that_cannot_be_built_are_refused_in_one_line_before_any_work(spec, dim, message) -> None:
    from iso_bench.checks import check_methods

    with pytest.raises(MethodError) as info:
        check_methods([spec], {"sentence": dim} if dim else {}, "org/model")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_truncate_keeps_the_first_coordinates_and_pca_the_top_directions() -> None:
    X = anisotropic(n=400, d=10)
    np.testing.assert_array_equal(make_method("truncate-3")[0].transform(X), X[:, :3])
    pca = make_method("pca-2")[0].fit(X)
    Z = pca.transform(X)
    # centred, uncorrelated, in decreasing variance: the top two eigenvalues of the covariance, by hand
    vals = np.linalg.eigvalsh(np.cov(X, rowvar=False))[::-1]
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(np.cov(Z, rowvar=False), np.diag(vals[:2]), atol=1e-9)
    # all directions: a rotation of the centred vectors (norms kept)
    full = make_method("pca")[0].fit(X).transform(X)
    np.testing.assert_allclose(np.linalg.norm(full, axis=1), np.linalg.norm(X - X.mean(0), axis=1), rtol=1e-12)


def test_truncate_equals_sentence_transformers_truncate_dim(minilm_backbone) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["A man is playing a guitar.", "A woman slices a cucumber.", "The cat sat on the mat."]
    full = np.stack(minilm_backbone.encode(texts, progress=False)["sentence"])  # iso-bench's raw vectors
    cut = SentenceTransformer(MINILM, device="cpu", revision=minilm_backbone.revision, truncate_dim=128).encode(texts)
    assert cut.shape == (3, 128)
    np.testing.assert_allclose(make_method("truncate-128")[0].transform(full), cut, rtol=0, atol=1e-6)


def test_bytes_as_stored() -> None:
    cases = {"raw": 1536, "whiten-256": 1024, "raw-precision=int8": 384, "raw-precision=binary": 48,
             "pca-128-precision=binary": 16, "truncate-64-precision=int8": 64}
    assert {s: storage_record(make_method(s)[0], 384)["bytes"] for s in cases} == cases
    # a 16-bit model's raw values stay 16-bit (raw, a cut of them); every transform is float32
    assert storage_record(make_method("raw")[0], 384, "float16") == {"precision": "float16", "dim": 384, "bytes": 768}
    assert storage_record(make_method("center")[0], 384, "bfloat16")["bytes"] == 1536
    assert storage_record(make_method("raw-precision=binary")[0], 20)["bytes"] == 3  # 20 bits in 3 bytes


def test_an_int8_variant_calibrates_on_its_fit_corpus_and_records_it(tmp_path: Path, keyword_variant) -> None:
    """The fit corpus file alone sets the ranges; the evaluated texts, far outside them, are clipped."""
    from tests.conftest import KeywordBackbone  # noqa: F401 - the keyword model of keyword_variant

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("cat\ncat dog\ndog dog\nthe\n", encoding="utf-8")  # cat counts 0..1, dog 0..2
    variant = keyword_variant(["cat", "dog"], "raw-precision=int8")
    variant.corpus = type(variant.corpus)(str(corpus))
    codes = variant.vectors(["cat cat cat cat dog", "the"], "STSBenchmark")
    method = variant.fitted_method("STSBenchmark")
    np.testing.assert_array_equal(method.ranges_, [[0, 0], [1, 2]])
    # 4 cats clip to the top code; "the" has no keyword: the bottom; one dog of 0..2 is bucket 127 or just below
    assert codes[0, 0] == 127 and codes[1].tolist() == [-128, -128] and codes[0, 1] in (-1.0, -2.0)
    record = variant.fit_records["STSBenchmark"]
    assert record["n_texts"] == 4 and record["fits"][0]["n_vectors"] == 4
    assert record["fits"][0]["learned"]["ranges_sha256_"] == method.ranges_sha256_
    assert storage_of(method, variant) == {"precision": "int8", "dim": 2, "bytes": 2,
                                           "calibration": {"ranges_sha256": method.ranges_sha256_}}


def test_an_exported_int8_variant_carries_its_calibration_and_encodes_its_codes(
        static_dir: Path, tmp_path: Path, capsys) -> None:  # noqa: F811 - static_dir: the fixture imported above
    """center-precision=int8 of a small static pipeline, fitted on a text file: the folder gives the variant's codes,
    its state holds the ranges, its record says how to store them."""
    import json

    from sentence_transformers import SentenceTransformer

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.cli import main
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore
    folder = static_dir
    texts = ["the cat sat on the mat", "a dog plays guitar", "the man is slicing a cucumber", "girl plays piano"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "static-int8"
    assert main(["export", f"{folder}+center-precision=int8", "--fit-corpus", str(corpus), "-o", str(out),
                 "--cache-dir", str(tmp_path / "cache"), "--no-progress"]) == 0
    capsys.readouterr()
    record = json.loads((out / "iso_bench_transform.json").read_text())
    store = EmbeddingStore(load_backbone(str(folder)), None, kinds=("sentence",), progress=False)
    variant = VariantEncoder(store, "center-precision=int8", corpus=CorpusProvider(str(corpus)))
    expected = variant.vectors(texts + ["money money"], None)
    method = variant.fitted_method(None)
    assert record["export"]["precision"] == "int8" and record["export"]["stored_bytes"] == 8
    assert record["export"]["calibration"]["ranges_sha256"] == method.ranges_sha256_
    got = SentenceTransformer(str(out), device="cpu", trust_remote_code=True).encode(texts + ["money money"])
    np.testing.assert_array_equal(got, expected)  # the same codes, the unseen text's among them
    assert set(np.unique(got)) <= set(range(-128, 128)) and got.min() == -128
    assert "Stored as int8 (8 bytes a vector)" in (out / "README.md").read_text()


@pytest.mark.parametrize("spec", ["raw-level=token-precision=binary", "zipfian-whiten-precision=int8"])
def test_a_token_level_variant_with_a_stage_is_refused_by_export_before_any_work(tmp_path: Path, spec: str) -> None:
    """Its stage follows the model's pooling, and an exported module stands before it: refused in one line, with
    nothing written and no model loaded (the model named does not exist)."""
    from iso_bench.export.build import ExportError, export

    with pytest.raises(ExportError, match="cannot be exported whole") as caught:
        export(f"no-such/model+{spec}", "task:STSBenchmark", tmp_path / "out")
    assert "\n" not in str(caught.value) and not (tmp_path / "out").exists()
