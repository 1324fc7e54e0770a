"""Export round trips on the real all-MiniLM-L6-v2, fitted on STSBenchmark's test texts (the fit of
``iso-bench run`` on that task): for whiten, zscore, softdecay (Dense modules) and flow, cluster-pca (the iso-bench
module), the exported transform applied to the cached raw vectors is the variant's, mteb scores the exported
folder as it scores the variant, and a Dense export loads where iso_bench cannot be imported.

One module-scoped fit and export per method. mteb's evaluations of the five folders share the network's forward
passes: every folder holds the base model's own Transformer (the same weight bytes, asserted), and each batch's
token embeddings are computed once, by the first folder, and handed to the others' Transformer for the same
batch (the same input ids, so the same numbers the network would compute again).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

mteb = pytest.importorskip("mteb")

from iso_bench.registry import IsoBenchError  # noqa: E402
from tests.conftest import MINILM, SHARED_DATA, _missing  # noqa: E402

pytestmark = pytest.mark.slow

SPECS = ("whiten", "zscore", "softdecay", "flow", "cluster-pca")
DENSE = {"whiten": 2, "zscore": 2, "softdecay": 1}  # Dense modules after the base pipeline (offset, matrix)
MEASURED: dict[str, dict[str, float]] = {}  # printed at the end of the module (pytest -s): the tolerances reached


@pytest.fixture(scope="module")
def fitted(hub_mirror, tmp_path_factory):
    """The backbone, its raw-vector store (the CI cache when set: the texts are encoded once), STSBenchmark's
    fit corpus, and per method its variant encoder and exported folder."""
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.export import export_variant
    from iso_bench.vectors.store import EmbeddingStore

    try:
        backbone = load_backbone(MINILM, device="cpu")
    except IsoBenchError as exc:
        _missing(f"{MINILM} ({exc})")
    cache = os.environ.get("ISO_BENCH_CACHE") or tmp_path_factory.mktemp("cache")
    store = EmbeddingStore(backbone, cache, kinds=("sentence", "tokens", "pool"), progress=False)
    provider = CorpusProvider("task", data_dir=SHARED_DATA)
    corpus = provider("STSBenchmark")
    root = tmp_path_factory.mktemp("exports")
    variants = {}
    for spec in SPECS:
        encoder = VariantEncoder(store, spec, corpus=provider)
        record = export_variant(encoder, "STSBenchmark", root / spec)
        variants[spec] = (encoder, root / spec, record)
    yield store, corpus, variants, Path(cache)
    if MEASURED:
        print("\nexport tolerances reached (max |difference|):\n" + json.dumps(MEASURED, indent=1))


@pytest.fixture(scope="module")
def loaded(fitted):
    """Each exported folder loaded by sentence-transformers, their Transformer's forward passes shared (see the
    module docstring)."""
    from sentence_transformers import SentenceTransformer

    variants = fitted[2]
    models = {spec: SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
              for spec, (_, folder, _) in variants.items()}
    computed: dict[bytes, dict] = {}
    for model in models.values():
        transformer, forward = model[0], model[0].forward

        def shared(features, *args, _forward=forward, **kwargs):
            key = b"".join(repr(tuple(features[k].shape)).encode() + features[k].cpu().numpy().tobytes()
                           for k in ("input_ids", "attention_mask"))
            if key not in computed:
                before = set(features)
                out = _forward(features, *args, **kwargs)
                computed[key] = {k: v for k, v in out.items() if k not in before}
            features.update(computed[key])
            return features

        transformer.forward = shared
    return models


def _variant_vectors(fitted, spec: str) -> np.ndarray:
    _, corpus, variants, _ = fitted
    return variants[spec][0].vectors(list(corpus.texts), "STSBenchmark", task_metadata=corpus.task_metadata)


def _measure(spec: str, what: str, value: float) -> float:
    MEASURED.setdefault(spec, {})[what] = float(value)
    return value


def test_the_folders_hold_the_base_modules_then_the_post_processing(fitted) -> None:
    store, corpus, variants, _ = fitted
    weights = set()
    for spec, (_, folder, record) in variants.items():
        modules = json.loads((folder / "modules.json").read_text())
        types = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if spec == "cluster-pca":  # token level: before the pipeline's own pooling and Normalize
            assert types == ["Transformer", "PostProcessing", "Pooling", "Normalize"]
            assert [m["idx"] for m in modules] == [0, 1, 2, 3] and modules[1]["path"] == "3_PostProcessing"
            continue
        assert types[:3] == ["Transformer", "Pooling", "Normalize"]
        assert types[3:] == (["Dense"] * DENSE[spec] if spec in DENSE else ["PostProcessing"]), spec
        assert modules[-1]["type"].startswith("sentence_transformers." if spec in DENSE else "iso_bench.export.")
        weights.add(hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest())
        assert record["base_model"]["model"] == MINILM and record["base_model"]["revision"] == store.backbone.revision
        assert record["method"]["spec"] == spec and record["method"]["level"] == (
            "token" if spec == "cluster-pca" else "sentence")
        fit = record["fit_corpus"]
        assert (fit["fit_corpus"], fit["task"], fit["n_texts"]) == ("task", "STSBenchmark", len(corpus.texts))
        assert fit["texts_sha256"] == corpus.to_record()["texts_sha256"]
        assert json.loads((folder / "iso_bench_transform.json").read_text())["variant"] == f"{MINILM}+{spec}"
    assert len(weights) == 1  # every folder holds the base model's own Transformer, the same bytes
    whiten = variants["whiten"][2]
    assert whiten["method"]["resolved"]["dropped_"] == 3 and whiten["export"]["output_dim"] == 381


@pytest.mark.parametrize("spec", SPECS)
def test_the_exported_transform_on_the_cached_raw_vectors_is_the_variants(fitted, loaded, spec) -> None:
    """The plain arrays beside the modules, and the folder's own modules (Dense in float32, or the iso-bench
    module), applied to the cached raw vectors (token vectors for cluster-pca) give the variant's vectors."""
    import torch

    from iso_bench.export.module import read_state

    store, corpus, variants, _ = fitted
    texts = list(corpus.texts)
    Z = _variant_vectors(fitted, spec)
    _, folder, record = variants[spec]
    npz = folder / "iso_bench_transform.npz"
    model = loaded[spec]
    if spec in DENSE:
        X = store.sentences(texts)
        with np.load(npz, allow_pickle=False) as arrays:  # y = (x - offset) @ matrix, read with numpy alone
            plain = (X.astype(np.float64) - arrays["offset"]) @ arrays["matrix"]
        features = {"sentence_embedding": torch.from_numpy(np.array(X))}
        with torch.no_grad():
            for module in list(model)[3:]:
                features = module(features)
        modules = features["sentence_embedding"].numpy()
        scale = float(np.abs(Z).max())
        assert _measure(spec, "dense modules (float32)", np.abs(modules - Z).max()) <= 1e-5 * max(1.0, scale)
    else:
        method = read_state(record["method"]["spec"], npz, record["state"])
        if spec == "flow":
            X = store.sentences(texts)
            plain = method.transform(X)
            with torch.no_grad():
                modules = model[-1]({"sentence_embedding": torch.from_numpy(np.array(X))})["sentence_embedding"].numpy()
        else:  # the rows the pooling reads, transformed, then the pipeline's own modules after the transformer
            rows = store.pool_rows(texts)
            plain = store.backbone.pool([method.transform(r) for r in rows])
            with torch.no_grad():
                modules = np.stack([_through(list(model)[1:], r) for r in rows])
        assert _measure(spec, "iso-bench module", np.abs(modules - Z).max()) <= 1e-5
    assert _measure(spec, "npz transform", np.abs(plain - Z).max()) <= 1e-5
    assert plain.shape == Z.shape == (len(texts), record["export"]["output_dim"])


def _through(modules: list, rows: np.ndarray) -> np.ndarray:
    """One text's token vectors through ``modules`` (a loaded folder's modules after its Transformer)."""
    import torch

    features = {"token_embeddings": torch.from_numpy(np.array(rows))[None],
                "attention_mask": torch.ones(1, len(rows), dtype=torch.int64)}
    for module in modules:
        features = module(features)
    return features["sentence_embedding"][0].numpy()


@pytest.mark.parametrize("spec", SPECS)
def test_mteb_scores_the_exported_folder_as_the_variant(fitted, loaded, spec) -> None:
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    from iso_bench.data.sources import get_task

    def score(model) -> float:
        (result,) = mteb.evaluate(model, get_task("STSBenchmark", SHARED_DATA), cache=None,
                                  show_progress_bar=False).task_results
        return result.get_score()

    _, corpus, variants, _ = fitted
    variant = score(variants[spec][0])
    model = loaded[spec]
    folder = score(SentenceTransformerEncoderWrapper(model))
    end_to_end = model.encode(list(corpus.texts)[:256], batch_size=32)  # the folder's own vectors of some texts
    _measure(spec, "encode (first 256 texts)", np.abs(end_to_end - _variant_vectors(fitted, spec)[:256]).max())
    assert abs(_measure(spec, "main score", abs(folder - variant))) <= 1e-4, (spec, folder, variant)
    assert 0.5 < variant < 0.9  # a real score: cosine Spearman of the variant on STSBenchmark


DENSE_ONLY = """
import sys, json
sys.modules["iso_bench"] = None  # `import iso_bench` fails in this process
try:
    import iso_bench
except ImportError:
    pass
else:
    raise SystemExit("iso_bench could be imported")
from sentence_transformers import SentenceTransformer
dense = SentenceTransformer(sys.argv[1], device="cpu")
vectors = dense.encode(["A man is playing a guitar.", "A woman slices a cucumber."])
try:
    SentenceTransformer(sys.argv[2], device="cpu", trust_remote_code=True)
    module = "loaded"
except Exception as exc:  # what sentence-transformers says when the module's class cannot be imported
    module = "ImportError" if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
print(json.dumps({"vectors": vectors.tolist(), "module": module}))
"""


def test_a_dense_export_loads_and_encodes_where_iso_bench_cannot_be_imported(fitted, loaded) -> None:
    variants = fitted[2]
    env = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "-c", DENSE_ONLY, str(variants["whiten"][1]), str(variants["flow"][1])],
                          capture_output=True, text=True, timeout=300, env=env, cwd=Path(variants["whiten"][1]).parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    here = loaded["whiten"].encode(["A man is playing a guitar.", "A woman slices a cucumber."])
    np.testing.assert_allclose(np.array(out["vectors"]), here, atol=1e-5)
    assert np.array(out["vectors"]).shape == (2, 381)
    assert out["module"] == "ImportError"  # the flow's folder needs iso-bench: the check can fail


def test_the_export_command_fits_on_a_task_and_replaces_an_earlier_export(fitted, tmp_path, capsys) -> None:
    """``iso-bench export MODEL+SPEC --fit-corpus task:NAME -o DIR`` as the README writes it; run again it
    refuses the existing folder, and with --overwrite replaces it whole, but only while it holds nothing the
    export did not write: a file added to it is named and kept."""
    from sentence_transformers import SentenceTransformer

    from iso_bench.cli import main

    store, corpus, _, cache = fitted
    out = tmp_path / "minilm-center"
    argv = ["export", f"{MINILM}+center", "--fit-corpus", "task:STSBenchmark", "-o", str(out),
            "--data-dir", str(SHARED_DATA), "--cache-dir", str(cache), "--no-progress"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert f"wrote {out}" in said and "SentenceTransformer(" in said and "trust_remote_code" not in said
    record = json.loads((out / "iso_bench_transform.json").read_text())
    assert record["fit_corpus"]["texts_sha256"] == corpus.to_record()["texts_sha256"]
    assert record["command"].startswith(f"iso-bench export {MINILM}+center --fit-corpus task:STSBenchmark")
    X = store.sentences(list(corpus.texts)[:5])
    got = SentenceTransformer(str(out), device="cpu").encode(list(corpus.texts)[:5])
    np.testing.assert_allclose(got, X - store.sentences(list(corpus.texts)).astype(np.float64).mean(0), atol=1e-5)
    assert main(argv) == 2 and "exists and is not empty" in capsys.readouterr().err
    (out / "notes.txt").write_text("the user's", encoding="utf-8")
    assert main([*argv, "--overwrite"]) == 2
    assert "the folder holds others: notes.txt; move them out" in capsys.readouterr().err
    assert (out / "notes.txt").read_text(encoding="utf-8") == "the user's"
    (out / "notes.txt").unlink()
    (out / "1_Pooling" / "config.json").unlink()  # a file of the export gone: still the export's folder
    assert main([*argv, "--overwrite"]) == 0
    assert (out / "1_Pooling" / "config.json").is_file() and main(["export", "--verify", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["minilm-center"]  # nothing temporary left beside it


def test_a_flipped_byte_in_the_dense_weights_fails_verify_and_loading(fitted, tmp_path, capsys) -> None:
    """The Dense layer's weights changed by one bit: ``export --verify`` and iso-bench's loading of the folder
    refuse it in one line naming the file."""
    import shutil

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.cli import main

    folder = tmp_path / "whiten"
    shutil.copytree(fitted[2]["whiten"][1], folder)
    assert main(["export", "--verify", str(folder)]) == 0
    weights = next(folder.glob("*_Dense/model.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-7] ^= 0x40  # a float32 of the matrix
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["export", "--verify", str(folder)]) == 2
    err = capsys.readouterr().err.splitlines()
    rel = weights.relative_to(folder).as_posix()
    assert len(err) == 1 and f"{rel} (changed: its SHA-256 is not the recorded one)" in err[0], err
    with pytest.raises(IsoBenchError, match=f"{rel} \\(changed"):
        load_backbone(str(folder), device="cpu")


@pytest.mark.parametrize("how", ["tmpfs", "injected"])
def test_an_export_onto_a_full_disk_is_one_line_and_leaves_nothing(fitted, tmp_path, capsys, how) -> None:
    """The model's weights do not fit (a 64 kB tmpfs: safetensors' own error; or ENOSPC injected at the first
    write): one ``iso-bench: error:`` line, no folder and no temporary folder left."""
    import subprocess

    from iso_bench.cli import main

    disk = tmp_path / "disk"
    disk.mkdir()
    env = {}
    if how == "tmpfs":
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                               capture_output=True, check=False).returncode:
            pytest.skip("cannot mount a tmpfs here; the injected case covers it")
    else:
        env = {"ISO_BENCH_FULL_DISK": str(disk)}
    try:
        os.environ.update(env)
        argv = ["export", f"{MINILM}+center", "--fit-corpus", "task:STSBenchmark", "-o", str(disk / "out"),
                "--data-dir", str(SHARED_DATA), "--cache-dir", str(fitted[3]), "--no-progress"]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("iso-bench: error: "), err
        assert ("cannot write the model's weights" if how == "tmpfs" else "No space left on device") in err[0]
        assert str(disk / "out") in err[0] and list(disk.iterdir()) == []
    finally:
        for key in env:
            os.environ.pop(key)
        if how == "tmpfs":
            subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("spec", ["whiten", "flow"])
def test_an_exports_fit_is_the_runs_bit_for_bit(fitted, spec, monkeypatch) -> None:
    """The variant fitted afresh as a run fits it (no fit cache: ``vectors``, under one BLAS thread) has the same
    learned arrays, to the bit, as the export wrote (iso_bench_transform.npz)."""
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.export.module import read_state

    store, corpus, variants, _ = fitted
    _, folder, record = variants[spec]
    monkeypatch.setenv("ISO_BENCH_NO_FIT_CACHE", "1")
    run = VariantEncoder(store, spec, corpus=CorpusProvider("task", data_dir=SHARED_DATA))
    run.vectors(list(corpus.texts)[:2], "STSBenchmark", task_metadata=corpus.task_metadata)
    fresh = run.fitted_method("STSBenchmark")
    exported = read_state(spec, folder / "iso_bench_transform.npz", record["state"])
    names = [k for k in vars(fresh) if k.endswith("_") and isinstance(vars(fresh)[k], np.ndarray)]
    assert names, spec
    for name in names:
        assert np.array_equal(vars(fresh)[name], vars(exported)[name]), (spec, name)
    X = store.sentences(list(corpus.texts)[:64])
    assert np.array_equal(fresh.transform(X), exported.transform(X))
