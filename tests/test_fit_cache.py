"""Fitted methods are cached on disk: a cached fit transforms exactly as a fresh one, a damaged file is set aside
and the method fitted again, and anything a fit depends on makes another file."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from iso_bench.methods import make_method
from iso_bench.vectors.fit_cache import FitFileError, load_fit, save_fit
from tests.conftest import KeywordBackbone

VOCAB = ["cat", "dog", "bird", "fish", "mat", "tree", "sun", "car"]
SPECS = ["center", "clip", "abtt-2", "whiten", "whiten-4", "cluster-pca-3-2", "cluster-pca-3-2-init=kmeanspp",
         "cluster-pca-3-2-algorithm=gmm", "flow-steps=4", "flow-arch=affine-steps=3",
         "flow-permutation=invconv-steps=3"]


@pytest.mark.parametrize("spec", SPECS)
def test_a_stored_fit_loads_to_exactly_the_fresh_fits_transform(spec: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(400, 12)) @ rng.normal(size=(12, 12)) + 3.0).astype(np.float32)
    fresh = make_method(spec)[0].fit(X)
    path = tmp_path / "fit.npz"
    assert save_fit(path, {"spec": spec}, fresh, {"level": "sentence", "n_vectors": 400})
    loaded, record = load_fit(path, {"spec": spec}, make_method(spec)[0])
    Y = rng.normal(size=(50, 12)).astype(np.float32) + 3.0
    assert np.array_equal(loaded.transform(Y), fresh.transform(Y)), spec
    assert record == {"level": "sentence", "n_vectors": 400}
    # the learned state comes back with its types: tuples stay tuples, numpy scalars numpy scalars
    for name, value in vars(fresh).items():
        if name.endswith("_") and not name.startswith("_"):
            assert type(getattr(loaded, name)) is type(value), name


def test_a_file_of_another_key_or_with_changed_bytes_is_refused(tmp_path: Path) -> None:
    X = np.random.default_rng(1).normal(size=(100, 6))
    path = tmp_path / "fit.npz"
    save_fit(path, {"k": 1}, make_method("whiten")[0].fit(X), {"n_vectors": 100})
    with pytest.raises(FitFileError, match="another key"):
        load_fit(path, {"k": 2}, make_method("whiten")[0])
    with np.load(path) as z:
        arrays = {name: z[name] for name in z.files}
    arrays["a1"] = arrays["a1"] + 1e-12  # an array changed, the zip entry well-formed: only the digest can tell
    np.savez(path, **arrays)
    with pytest.raises(FitFileError, match="checksum"):
        load_fit(path, {"k": 1}, make_method("whiten")[0])
    raw = path.read_bytes()
    path.write_bytes(bytes(raw[: len(raw) // 2]))
    with pytest.raises(FitFileError, match="unreadable"):
        load_fit(path, {"k": 1}, make_method("whiten")[0])


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    lines = [" ".join(rng.choice(VOCAB, size=rng.integers(2, 6))) for _ in range(60)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n")
    return path


def _variant(cache: Path, spec: str, corpus: Path, seed: int = 0):
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore

    store = EmbeddingStore(KeywordBackbone(VOCAB), cache, kinds=("sentence", "tokens"), progress=False)
    return VariantEncoder(store, spec, corpus=str(corpus), seed=seed)


def test_a_rerun_loads_the_fit_instead_of_fitting(tmp_path: Path, corpus_file: Path) -> None:
    texts = ["cat dog", "bird fish mat", "sun car tree cat"]
    first = _variant(tmp_path / "cache", "flow-steps=3", corpus_file)
    expected = first.vectors(texts, None)
    assert (first.fits_run, first.fits_loaded) == (1, 0)
    (stored,) = (tmp_path / "cache").glob("*/*/*/fits/*.npz")
    again = _variant(tmp_path / "cache", "flow-steps=3", corpus_file)
    assert np.array_equal(again.vectors(texts, None), expected)
    assert (again.fits_run, again.fits_loaded) == (0, 1)
    assert again.fit_records == first.fit_records  # the provenance written with the results is the same
    # another seed, another spec or another fit corpus is another fit
    other_corpus = corpus_file.with_name("other.txt")
    other_corpus.write_text("cat dog\n" + corpus_file.read_text())
    for variant in (_variant(tmp_path / "cache", "flow-steps=3", corpus_file, seed=1),
                    _variant(tmp_path / "cache", "flow-steps=4", corpus_file),
                    _variant(tmp_path / "cache", "flow-steps=3", other_corpus)):
        variant.fitted_method(None)
        assert variant.fits_run == 1
    assert len(list(stored.parent.glob("*.npz"))) == 4


def test_a_damaged_fit_file_is_set_aside_and_the_method_fitted_again(tmp_path: Path, corpus_file: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    texts = ["cat dog", "bird fish mat"]
    expected = _variant(tmp_path / "cache", "whiten", corpus_file).vectors(texts, None)
    (stored,) = (tmp_path / "cache").glob("*/*/*/fits/*.npz")
    stored.write_bytes(stored.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="iso_bench.vectors.fit_cache"):
        variant = _variant(tmp_path / "cache", "whiten", corpus_file)
        assert np.array_equal(variant.vectors(texts, None), expected)
    assert variant.fits_run == 1 and "damaged fit file set aside" in caplog.text
    assert stored.with_suffix(".npz.bad").is_file()
    reloaded = _variant(tmp_path / "cache", "whiten", corpus_file)  # refitted and stored again
    assert np.array_equal(reloaded.vectors(texts, None), expected) and reloaded.fits_loaded == 1


def test_a_memory_only_store_or_the_switch_stores_nothing(tmp_path: Path, corpus_file: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISO_BENCH_NO_FIT_CACHE", "1")
    variant = _variant(tmp_path / "cache", "whiten", corpus_file)
    variant.fitted_method(None)
    assert variant.fits_run == 1 and not list((tmp_path / "cache").glob("*/*/*/fits/*"))


SLOW_FIT = """
import sys, time
from pathlib import Path
from iso_bench.methods import make_method
from tests.test_fit_cache import _variant

cls = type(make_method("whiten")[0])
fit = cls.fit
cls.fit = lambda self, X, **kw: (time.sleep(2), fit(self, X, **kw))[1]  # a fit that outlasts the other's start
cache, corpus, go = (Path(a) for a in sys.argv[1:])
variant = _variant(cache, "whiten", corpus)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.01)
variant.fitted_method(None)
print(variant.fits_run, variant.fits_loaded, flush=True)
"""


def test_two_identical_runs_at_once_fit_once_and_share_it(tmp_path: Path, corpus_file: Path) -> None:
    """Two processes that need the same fit at the same instant: one fits, the other waits for it and loads it
    (as the raw vectors are shared); no lock file is left behind."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-c", SLOW_FIT, str(tmp_path / "cache"), str(corpus_file), str(tmp_path / "go")]
    runs = [subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    assert [run.stdout.readline() for run in runs] == ["ready\n", "ready\n"]
    (tmp_path / "go").touch()
    counts = sorted(run.communicate(timeout=300)[0].strip() for run in runs)
    assert [run.returncode for run in runs] == [0, 0]
    assert counts == ["0 1", "1 0"]  # fits run, fits loaded: one fit, shared
    (fits,) = {p.parent for p in (tmp_path / "cache").glob("*/*/*/fits/*")}
    assert [p.suffix for p in fits.iterdir()] == [".npz"]
