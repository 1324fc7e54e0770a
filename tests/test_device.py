"""Fits and transforms on a GPU: with ``device`` a CUDA device, the large products of the linear methods (their
scatter matrices, streamed or not, and their transforms) run there through torch, and give numpy's numbers up
to float64 rounding. No GPU is needed: the torch path is checked here on torch's CPU device, standing in for
CUDA, and without CUDA a ``cuda`` method computes with numpy, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import iso_bench.numerics.linalg as linalg
from iso_bench.methods import make_method

LINEAR = ["whiten", "whiten-5", "zca", "abtt", "softdecay", "zipfian-whiten", "zipfian-whiten-weights=uniform"]


def anisotropic(n: int, d: int = 24, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ np.diag(np.linspace(0.2, 3.0, d)) + 20.0
    X[:, 3] += 150.0
    return X.astype(np.float32)


@pytest.fixture
def torch_products(monkeypatch):
    """Route every product through the torch path (torch's CPU device in CUDA's place); count the crossings."""
    crossings = []
    real_to = linalg._to

    def counted(dev, X):
        crossings.append(X.shape)
        return real_to(dev, X)

    monkeypatch.setattr(linalg, "gpu_device",
                        lambda device: torch.device("cpu") if str(device).startswith("cuda") else None)
    monkeypatch.setattr(linalg, "GPU_MIN_MACS", 0)
    monkeypatch.setattr(linalg, "GPU_ROWS", 1000)  # several blocks of rows per product
    monkeypatch.setattr(linalg, "_to", counted)
    return crossings


def _fit(spec: str, X: np.ndarray, device: str, stream: bool) -> object:
    method = make_method(spec)[0]
    method.device = device
    types = np.arange(len(X)) % 7  # token types, for the uniform weights
    if stream:
        for i in range(0, len(X), 700):
            method.partial_fit(X[i:i + 700])
        return method.finalize()
    return method.fit(X, token_types=types) if method.needs_token_types() else method.fit(X)


@pytest.mark.parametrize("spec", LINEAR)
def test_the_torch_path_gives_numpys_numbers(spec: str, torch_products) -> None:
    X, probe = anisotropic(3000), anisotropic(40, seed=1)
    for stream in (False, True) if make_method(spec)[0].streaming() else (False,):
        expected = _fit(spec, X, "cpu", stream).transform(probe)
        assert not torch_products  # "cpu": numpy only
        got = _fit(spec, X, "cuda", stream).transform(probe)
        assert torch_products, f"{spec}: no product went through torch"
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        torch_products.clear()


def test_products_below_the_cut_off_stay_on_the_cpu(monkeypatch) -> None:
    monkeypatch.setattr(linalg, "gpu_device", lambda device: torch.device("cpu"))
    monkeypatch.setattr(linalg, "_to", lambda dev, X: pytest.fail("a small product left the CPU"))
    small = np.ones((10, 10))
    np.testing.assert_array_equal(linalg.matmul(small, small, "cuda"), small @ small)
    np.testing.assert_array_equal(linalg.gram(small, "cuda"), small.T @ small)


def test_without_cuda_a_cuda_method_computes_with_numpy_bit_for_bit() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the products go to it")
    assert linalg.gpu_device("cuda") is None and linalg.gpu_device("cuda:1") is None
    X, probe = anisotropic(3000), anisotropic(40, seed=1)
    for spec in LINEAR:
        np.testing.assert_array_equal(_fit(spec, X, "cuda", False).transform(probe),
                                      _fit(spec, X, "cpu", False).transform(probe))


def test_reversed_and_transposed_views_cross_as_their_values(torch_products) -> None:
    X = anisotropic(2500).astype(np.float64)
    for view in (X[::-1], X[:, ::-1], X.T.copy().T, X[::2]):
        np.testing.assert_allclose(linalg.matmul(view, view.T[:, :7], "cuda"), view @ view.T[:, :7], rtol=1e-12)
        np.testing.assert_allclose(linalg.gram(view, "cuda"), view.T @ view, rtol=1e-12)
    m = make_method("softdecay")[0]
    m.device = "cuda"
    m.fit(X)
    np.testing.assert_allclose(m.transform(X[::-1]), m.transform(X)[::-1], rtol=1e-9, atol=1e-9)


def test_a_variant_on_a_gpu_model_fits_its_method_for_that_device(tmp_path) -> None:
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore
    from tests.conftest import KeywordBackbone

    texts = [f"cat dog {w} t{i}" for i, w in enumerate(["bank", "river", "money", "piano"] * 10)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    backbone = KeywordBackbone(sorted({w for t in texts for w in t.split()}))
    backbone.device = "cuda:0"
    store = EmbeddingStore(backbone, None, progress=False)
    variant = VariantEncoder(store, "whiten-eps=0.1", corpus=str(corpus))
    assert variant.fitted_method(None).device == "cuda:0"


def test_a_fit_computed_on_a_gpu_says_so_in_its_record(tmp_path, torch_products) -> None:
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore
    from tests.conftest import KeywordBackbone

    texts = [f"cat dog {w} t{i}" for i, w in enumerate(["bank", "river", "money", "piano"] * 10)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    fits = {}
    for device in ("cuda:0", "cpu"):
        backbone = KeywordBackbone(sorted({w for t in texts for w in t.split()}))
        backbone.device = device
        variant = VariantEncoder(EmbeddingStore(backbone, None, progress=False), "whiten-eps=0.1", corpus=str(corpus))
        variant.fitted_method(None)
        (fits[device],) = variant.fit_records[variant.corpus(None).key]["fits"]
    assert fits["cuda:0"]["device"] == "cuda:0" and "device" not in fits["cpu"]
