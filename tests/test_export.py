"""``iso-bench export`` without a real model: its inputs refused in one line before any work, the output folder
rules, the iso-bench module's token selection (hand-checkable) and its state saved and loaded without pickle.
The round trips on the real all-MiniLM-L6-v2 are in tests/test_export_minilm.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from iso_bench.cli import main
from iso_bench.export import build
from iso_bench.export.build import ExportError, check_output, dense_modules, parse_fit_corpus, parse_variant
from iso_bench.files import write_manifest
from iso_bench.methods import make_method
from iso_bench.methods.contract import anisotropic
from iso_bench.outputs import whole_folder

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# ---- inputs refused before any work, each in one line ------------------------------------------------------
def _error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("iso-bench: error: "), err
    return err[0]


def test_bad_input_is_one_error_line_before_any_model_loads(capsys, tmp_path, monkeypatch) -> None:

    monkeypatch.setattr(build, "load_backbone", lambda *a, **k: pytest.fail("the model was loaded"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sat on the mat\nthe river bank\n", encoding="utf-8")
    out = tmp_path / "out"
    line = _error_line(capsys, ["export", f"{MINILM}+whitten", "--fit-corpus", str(corpus), "-o", str(out)])
    assert "unknown method 'whitten'" in line and "Did you mean 'whiten'" in line
    line = _error_line(capsys, ["export", f"{MINILM}+whiten", "--fit-corpus", str(tmp_path / "missing.txt"),
                                "-o", str(out)])
    assert "missing.txt does not exist" in line
    line = _error_line(capsys, ["export", MINILM, "--fit-corpus", str(corpus), "-o", str(out)])
    assert "is not MODEL+SPEC" in line
    line = _error_line(capsys, ["export", f"{MINILM}+whiten", "--fit-corpus", "task:", "-o", str(out)])
    assert "names no task" in line
    (out / "notes").mkdir(parents=True)  # an existing, non-empty folder
    line = _error_line(capsys, ["export", f"{MINILM}+whiten", "--fit-corpus", str(corpus), "-o", str(out)])
    assert "exists and is not empty" in line and "--overwrite" in line
    line = _error_line(capsys, ["export", f"{MINILM}+whiten", "--fit-corpus", str(corpus), "-o", str(out),
                                "--overwrite"])
    assert "not an iso-bench export" in line  # --overwrite never empties a folder that holds something else
    assert (out / "notes").is_dir()
    assert not any(p.name.startswith(".out@") for p in tmp_path.iterdir())  # nothing half-written beside it


@pytest.mark.slow
def test_an_unknown_task_is_one_error_line_with_close_names(capsys, tmp_path) -> None:
    line = _error_line(capsys, ["export", f"{MINILM}+whiten", "--fit-corpus", "task:STSBenchmrk",
                                "-o", str(tmp_path / "out")])
    assert "unknown task 'STSBenchmrk'" in line and "'STSBenchmark'" in line


def test_variant_and_fit_corpus_are_parsed(tmp_path) -> None:
    assert parse_variant("org/model+cluster-pca-27-12") == ("org/model", "cluster-pca-27-12")
    assert parse_variant("/data/my+model+zscore") == ("/data/my+model", "zscore")  # the last + separates
    assert parse_fit_corpus("task:STSBenchmark") == ("task", "STSBenchmark")
    assert parse_fit_corpus("train:Banking77Classification") == ("train", "Banking77Classification")
    assert parse_fit_corpus("corpus.txt") == ("corpus.txt", None)
    odd = tmp_path / "task:notes.txt"  # an existing file wins over the task: prefix
    odd.write_text("a text\n", encoding="utf-8")
    assert parse_fit_corpus(str(odd)) == (str(odd), None)
    with pytest.raises(ExportError, match="is not MODEL"):
        parse_variant("whiten+")


def _earlier_export(folder: Path) -> Path:
    """A folder as an export leaves it: a few files in subfolders, and the manifest listing them."""
    (folder / "3_Dense").mkdir(parents=True)
    (folder / "iso_bench_transform.json").write_text("{}", encoding="utf-8")
    (folder / "3_Dense" / "model.safetensors").write_bytes(bytes(range(256)))
    write_manifest(folder)
    return folder


def test_the_output_may_be_new_empty_or_an_earlier_export(tmp_path) -> None:
    assert check_output(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert check_output(tmp_path / "empty") == tmp_path / "empty"
    earlier = _earlier_export(tmp_path / "earlier")
    with pytest.raises(ExportError, match="not empty"):
        check_output(earlier)
    assert check_output(earlier, overwrite=True) == earlier
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ExportError, match="is a file"):
        check_output(tmp_path / "file", overwrite=True)


def test_overwrite_never_deletes_a_file_the_export_did_not_write(tmp_path, capsys, monkeypatch) -> None:
    """A record file alone does not make a folder an export: the user's thesis.tex beside it is named and kept;
    so is one added to a real export (by its manifest), or an exported file changed since."""

    monkeypatch.setattr(build, "load_backbone", lambda *a, **k: pytest.fail("the model was loaded"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sat on the mat\nthe river bank\n", encoding="utf-8")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "iso_bench_transform.json").write_text("{}", encoding="utf-8")
    (fake / "thesis.tex").write_text("precious", encoding="utf-8")
    argv = ["export", f"{MINILM}+zscore", "--fit-corpus", str(corpus), "-o", str(fake), "--overwrite"]
    assert "not an iso-bench export (no readable iso_bench_manifest.json)" in _error_line(capsys, argv)
    assert (fake / "thesis.tex").read_text(encoding="utf-8") == "precious"
    earlier = _earlier_export(tmp_path / "earlier")
    (earlier / "thesis.tex").write_text("precious", encoding="utf-8")
    (earlier / "3_Dense" / "notes").mkdir()
    argv[-2] = str(earlier)
    line = _error_line(capsys, argv)
    assert "the folder holds others: 3_Dense/notes/, thesis.tex; move them out" in line
    (earlier / "thesis.tex").unlink()
    (earlier / "3_Dense" / "notes").rmdir()
    (earlier / "iso_bench_transform.json").write_text('{"edited": 1}', encoding="utf-8")
    assert "iso_bench_transform.json (changed since the export)" in _error_line(capsys, argv)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "earlier", "fake"]


def test_an_unwritable_output_or_a_negative_seed_is_one_line_before_any_work(tmp_path, capsys, monkeypatch) -> None:

    monkeypatch.setattr(build, "load_backbone", lambda *a, **k: pytest.fail("the model was loaded"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sat on the mat\nthe river bank\n", encoding="utf-8")
    line = _error_line(capsys, ["export", f"{MINILM}+zscore", "--fit-corpus", str(corpus), "-o", "/proc/isob"])
    assert line.startswith("iso-bench: error: -o /proc/isob: cannot write in /proc (")
    line = _error_line(capsys, ["export", f"{MINILM}+cluster-pca", "--fit-corpus", str(corpus), "-o",
                                str(tmp_path / "out"), "--seed", "-5"])
    assert line == ("iso-bench: error: --seed -5: a seed is a whole number >= 0 (numpy's generators take no "
                    "negative seed); e.g. --seed 0")
    line = _error_line(capsys, ["run", "--methods", "cluster-pca", "--tasks", "STS12", "--seeds", "0", "-5",
                                "--results", str(tmp_path / "results")])
    assert line.startswith("iso-bench: error: --seeds -5: a seed is a whole number >= 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no results folder, no output


def test_a_symlink_output_is_written_through_and_the_link_kept(tmp_path) -> None:
    real = _earlier_export(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to("real")
    assert check_output(link, overwrite=True) == real
    with whole_folder(check_output(link, overwrite=True), link, lambda: check_output(link, overwrite=True),
                      ExportError) as folder:
        (folder / "modules.json").write_text("[]", encoding="utf-8")
    assert link.is_symlink() and os.readlink(link) == "real" and (real / "modules.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # no stray temporary folder or link


def test_verify_checks_every_file_of_the_manifest(tmp_path, capsys) -> None:
    folder = _earlier_export(tmp_path / "export")
    assert main(["export", "--verify", str(folder)]) == 0
    assert "every file its iso_bench_manifest.json lists has its recorded SHA-256" in capsys.readouterr().out
    weights = folder / "3_Dense" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0x01
    weights.write_bytes(bytes(data))
    line = _error_line(capsys, ["export", "--verify", str(folder)])
    assert "1 of its 2 files differ from its iso_bench_manifest.json: 3_Dense/model.safetensors (changed" in line
    assert "export it again" in line
    line = _error_line(capsys, ["export", "--verify", str(tmp_path)])
    assert "no readable iso_bench_manifest.json" in line


def test_verify_stays_inside_the_folder_and_says_a_missing_one_is_missing(tmp_path, capsys) -> None:
    """A manifest listing ``../x`` or an absolute path (whose SHA-256 is that file's) is refused naming them, and
    nothing outside is read; a folder that is not there is said to be missing."""
    import hashlib
    import json

    folder = _earlier_export(tmp_path / "export")
    outside = tmp_path / "secret.txt"
    outside.write_text("not the export's", encoding="utf-8")
    listed = json.loads((folder / "iso_bench_manifest.json").read_text())
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    listed["files"].update({"../secret.txt": digest, str(outside): digest})
    (folder / "iso_bench_manifest.json").write_text(json.dumps(listed), encoding="utf-8")
    line = _error_line(capsys, ["export", "--verify", str(folder)])
    assert line == (f"iso-bench: error: {folder}: its iso_bench_manifest.json lists files outside the folder "
                    f"(../secret.txt, {outside}), which are never read: not a manifest iso-bench wrote; do not use "
                    "the folder, export it again")
    assert _error_line(capsys, ["export", "--verify", str(tmp_path / "gone")]) == (
        f"iso-bench: error: {tmp_path / 'gone'}: no such folder")


def test_verify_refuses_a_subfolder_linked_out_of_the_export(tmp_path, capsys) -> None:
    """``3_Dense`` replaced by a link to a folder outside holding the very same bytes: every listed file has its
    recorded SHA-256 through the link, yet it is not the export's file; refused, by ``--verify`` and by the check
    made whenever an exported folder is loaded (``verify_manifest``), and ``--overwrite`` leaves it alone."""
    from iso_bench.files import ManifestError, verify_manifest

    folder = _earlier_export(tmp_path / "export")
    (folder / "3_Dense").rename(tmp_path / "elsewhere")
    (folder / "3_Dense").symlink_to(tmp_path / "elsewhere")
    line = _error_line(capsys, ["export", "--verify", str(folder)])
    assert line == (f"iso-bench: error: {folder}: 1 of its 2 files differ from its iso_bench_manifest.json: "
                    "3_Dense/model.safetensors (reached through a symbolic link to a folder, not the folder's own "
                    "file). The folder was changed after it was written: do not use it; export it again")
    with pytest.raises(ManifestError, match="symbolic link"):
        verify_manifest(folder)
    with pytest.raises(ExportError, match=r"the folder holds others: 3_Dense; move them out"):
        check_output(folder, overwrite=True)


# ---- Dense modules of an affine map ------------------------------------------------------------------------
def test_dense_modules_apply_the_affine_map_in_float32() -> None:
    """Offset first, through an identity matrix (exact) and a bias, then the matrix: the whitened vectors of
    anisotropic data agree with the float64 map to float32 rounding; no module for the identity or a zero offset."""
    import torch

    X = anisotropic(n=400, d=12)
    method = make_method("whiten")[0].fit(X)
    offset, matrix = method.affine()
    modules = dense_modules(offset, matrix, 12)
    assert [(m.in_features, m.out_features, m.bias) for m in modules] == [(12, 12, True), (12, 12, False)]
    with torch.no_grad():
        features = {"sentence_embedding": torch.from_numpy(X.astype(np.float32))}
        for module in modules:
            features = module(features)
    Z = method.transform(X.astype(np.float32))
    got = features["sentence_embedding"].numpy()
    assert np.abs(got - Z).max() < 1e-5 * np.abs(Z).max() and np.abs(got - Z).max() > 0  # float32, not float64
    assert dense_modules(None, None, 12) == [] and len(dense_modules(np.zeros(12), np.eye(12), 12)) == 1


# ---- the iso-bench module --------------------------------------------------------------------------------
def _module(spec: str = "center-level=token", **config):
    from iso_bench.export.module import PostProcessing

    method = make_method(spec)[0].fit(np.zeros((2, 2)) + np.arange(2.0))
    return PostProcessing(spec, level="token", output_dim=2, method=method, **config)


def test_the_module_keeps_a_texts_own_tokens_as_the_store_does() -> None:
    """Hand-built features: token t of text b holds [b, t]. Special tokens (1 before, 1 after), padding on
    either side and a prompt's tokens (prompt_length counts [CLS] and the prompt) are left out."""
    import torch

    hidden = torch.tensor([[[b, t] for t in range(6)] for b in range(3)], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1]])  # right- and left-padded
    module = _module(skip_start=1, skip_end=1)
    rows = module.token_vectors({"token_embeddings": hidden, "attention_mask": mask})
    assert [r[:, 1].tolist() for r in rows] == [[1, 2, 3], [1], [3, 4]]
    rows = module.token_vectors({"token_embeddings": hidden, "attention_mask": mask, "prompt_length": 2})
    assert [r[:, 1].tolist() for r in rows] == [[2, 3], [], [4]]
    with pytest.raises(ValueError, match=r"texts \[1\] of the batch have no token"):
        module.pool(rows)


def test_the_module_pools_as_the_variant_and_normalizes_where_the_pipeline_does() -> None:
    """center-level=token fitted on rows [0, 1] (mean [0, 1]): text [[2, 1], [4, 1]] gives mean [3, 0] - then
    [1, 0] with normalize."""
    import torch

    tokens = [np.array([[2.0, 1.0], [4.0, 1.0]], np.float32), np.array([[0.0, 4.0]], np.float32)]
    assert _module().pool(tokens).tolist() == [[3.0, 0.0], [0.0, 3.0]]
    assert _module(normalize=True).pool(tokens).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    # a static pipeline's token vectors are its embedding matrix's rows of the text's tokens
    module = _module(static=True)
    module._rows = torch.tensor([[0.0, 0.0], [2.0, 1.0], [4.0, 1.0], [0.0, 4.0]])
    features = {"input_ids": torch.tensor([1, 2, 3]), "offsets": torch.tensor([0, 2])}
    assert module(features)["sentence_embedding"].tolist() == [[3.0, 0.0], [0.0, 3.0]]


def test_the_module_saves_and_loads_its_state_without_pickle(tmp_path) -> None:
    """A flow's nested learned state: config.json, state.npz (arrays named by their place) and state.json; the
    loaded module transforms as the fitted one."""
    import torch

    from iso_bench.export.module import PostProcessing

    X = anisotropic(n=300, d=8)
    method = make_method("flow-steps=3")[0].fit(X)
    PostProcessing("flow-steps=3", output_dim=8, method=method).save(str(tmp_path))
    assert json.loads((tmp_path / "config.json").read_text())["spec"] == "flow-steps=3"
    with np.load(tmp_path / "state.npz", allow_pickle=False) as z:
        assert "mean_" in z.files and any(name.startswith("blocks_.0.") for name in z.files)
    loaded = PostProcessing.load(str(tmp_path))
    x = torch.from_numpy(X[:5].astype(np.float32))
    got = loaded({"sentence_embedding": x})["sentence_embedding"].numpy()
    np.testing.assert_array_equal(got, method.transform(X[:5].astype(np.float32)).astype(np.float32))
    assert loaded.get_embedding_dimension() == 8 and Path(tmp_path / "state.json").is_file()


# ---- local folders: a static pipeline, and a model without one --------------------------------------------
@pytest.fixture
def static_dir(tmp_path) -> Path:
    """A static (model2vec-like) sentence-transformers pipeline: a tiny WordPiece tokenizer, seeded 8-d rows,
    then Normalize."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from tests.conftest import WORDS

    vocab = {tok: i for i, tok in enumerate(["[UNK]", *WORDS])}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    rows = torch.from_numpy(np.random.default_rng(0).normal(size=(len(vocab), 8)).astype(np.float32))
    folder = tmp_path / "static-model"
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=rows), Normalize()]).save(str(folder))
    return folder


def test_a_token_level_variant_of_a_static_folder_exports_its_rows_pooled(static_dir, tmp_path, capsys) -> None:
    """center-level=token on a static model, fitted on a text file: the exported folder (the static embedding,
    Normalize, then iso-bench's module reading the embedding rows of the text's tokens) encodes as the variant."""
    from sentence_transformers import SentenceTransformer

    from iso_bench.backbones.loader import load_backbone
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore

    texts = ["the cat sat on the mat", "a dog plays guitar", "the man is slicing a cucumber", "girl plays piano"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "static-center"
    argv = ["export", f"{static_dir}+center-level=token", "--fit-corpus", str(corpus), "-o", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert main(argv) == 0
    assert "trust_remote_code=True" in capsys.readouterr().out
    record = json.loads((out / "iso_bench_transform.json").read_text())
    assert record["variant"] == "local/static-model+center-level=token"  # a folder by its name, not its path
    assert (record["fit_corpus"]["fit_corpus"], record["fit_corpus"]["n_texts"]) == ("file", 4)
    assert record["export"]["as"] == "module" and record["method"]["level"] == "token"
    store = EmbeddingStore(load_backbone(str(static_dir)), None, kinds=("sentence", "tokens"), progress=False)
    variant = VariantEncoder(store, "center-level=token", corpus=CorpusProvider(str(corpus)))
    expected = variant.vectors(texts, None)
    got = SentenceTransformer(str(out), device="cpu", trust_remote_code=True).encode(texts)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    raw = SentenceTransformer(str(static_dir), device="cpu").encode(texts)
    assert np.abs(got - raw).max() > 0.1  # the centred token rows, not the static model's own vectors
    # chained: zscore (Dense modules) after that export still needs its iso-bench module, so trust_remote_code
    chained = tmp_path / "chained"
    assert main(["export", f"{out}+zscore", "--fit-corpus", str(corpus), "-o", str(chained), "--trust-remote-code",
                 "--cache-dir", str(tmp_path / "cache"), "--no-progress"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"SentenceTransformer({str(chained)!r}, trust_remote_code=True)")
    assert json.loads((chained / "iso_bench_transform.json").read_text())["export"]["needs_iso_bench"] is True
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(chained), device="cpu")
    zscored = SentenceTransformer(str(chained), device="cpu", trust_remote_code=True).encode(texts)
    np.testing.assert_allclose(zscored.mean(0), 0, atol=1e-5)  # standardised on these very texts


def test_a_model_without_a_sentence_transformers_pipeline_is_refused_in_one_line(tiny_bert_dir, tmp_path,
                                                                                  capsys) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\na dog\n", encoding="utf-8")
    line = _error_line(capsys, ["export", f"{tiny_bert_dir}+center", "--fit-corpus", str(corpus),
                                "-o", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")])
    assert "has no sentence-transformers pipeline to export" in line and "own pooling of hidden states" in line
    assert not (tmp_path / "out").exists()
