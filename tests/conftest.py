"""Shared fixtures: a tiny random BERT built on the spot, and the real all-MiniLM-L6-v2 when present."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import iso_bench  # noqa: F401 - before numpy: pins the kernels numpy's OpenBLAS runs too (iso_bench.kernels)

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SHARED_DATA = Path(os.environ.get("ISO_BENCH_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
HUB_MIRROR = SHARED_DATA / "hub"
LEADERBOARDS = Path(__file__).resolve().parents[1] / "leaderboards"  # the published board: iso-bench v3's
PUBLISHED_RESULTS = LEADERBOARDS / "v3"  # its results folder (results/<model>/...)
V2_BOARD = LEADERBOARDS / "v2"  # iso-bench v2's board and result files, kept readable (units files: see below)
V2_UNITS_COMMIT = "e3ed15d9b9b422fd6cad2d543254d9cd9f7a7fac"  # the commit (tag iso-bench-v2) with v2's units files
V1_BOARD = LEADERBOARDS / "v1"  # iso-bench v1's board and results, kept readable

WORDS = ("the a cat dog sat on mat bank river money deposit play played playing guitar piano man woman "
         "is are was slicing cutting cucumber music plays hair girl boy un ##believ ##able ##s . , !").split()


def loaded_task(name: str, dataset, **attrs):
    """mteb's task ``name`` holding ``dataset`` as its loaded data (and ``attrs`` set on the object)."""
    import mteb

    task = mteb.get_task(name)
    task.dataset, task.data_loaded = dataset, True
    for key, value in attrs.items():
        setattr(task, key, value)
    return task


def small_mirror(root: Path, folders, pairs: int) -> Path:
    """A mirror under ``root`` holding the first ``pairs`` lines of each STS mirror folder ``mteb/<folder>``
    (skips where the shared mirror lacks one)."""
    for folder in folders:
        source = HUB_MIRROR / "mteb" / folder / "test.jsonl"
        if not source.is_file():
            pytest.skip(f"{source} is not available")
        lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:pairs]
        (root / "mteb" / folder).mkdir(parents=True)
        (root / "mteb" / folder / "test.jsonl").write_text("".join(lines), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def v2_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v2's results folder as it was published, units files included. The working tree keeps v2's result files but
    not its units files (``*.instances.npz``), which lie at :data:`V2_UNITS_COMMIT`: this is ``git archive`` of that
    commit's folder. Skips in a checkout without that commit (a shallow clone) or without git."""
    import io
    import shutil
    import subprocess
    import tarfile

    git = ["git", "-C", str(LEADERBOARDS.parent)]
    if shutil.which("git") is None or subprocess.run([*git, "cat-file", "-e", f"{V2_UNITS_COMMIT}^{{commit}}"],
                                                     capture_output=True).returncode:
        pytest.skip(f"commit {V2_UNITS_COMMIT[:12]} (v2's units files) is not in this checkout: fetch the full history")
    archive = subprocess.run([*git, "archive", V2_UNITS_COMMIT, "leaderboards/v2/results"], capture_output=True,
                             check=True).stdout
    out = tmp_path_factory.mktemp("v2")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(out, filter="data")
    return out / "leaderboards" / "v2"


@pytest.fixture(scope="session")
def v2_board(v2_results: Path):
    """v2's board built once from its results at :data:`V2_UNITS_COMMIT`, for its markdown and its web page (as
    published: without a table per budget)."""
    from iso_bench.report import build_leaderboard, read_results

    return build_leaderboard(read_results(v2_results))


@pytest.fixture(scope="session")
def published_results() -> Path:
    """The published board's results folder, units files included: v3's, in the working tree."""
    return PUBLISHED_RESULTS


@pytest.fixture(scope="session")
def published_computed(published_results: Path):
    """The published board computed once from its results (every interval, paired test and per-budget line), for
    each of its formats (:func:`iso_bench.report.write_computed`: the files write_leaderboard writes)."""
    from iso_bench.report import compute_leaderboard

    return compute_leaderboard(published_results)


@pytest.fixture(scope="session")
def published_board(published_computed):
    """The published board (v3's): its tables, verdict and plots."""
    return published_computed.board


@pytest.fixture(scope="session")
def v1_computed():
    """v1's board computed once from its committed results (every interval, paired test and per-budget line), for
    its markdown and its web page (:func:`iso_bench.report.write_computed`: the files write_leaderboard writes)."""
    from iso_bench.report import compute_leaderboard

    return compute_leaderboard(V1_BOARD)


def _missing(what: str) -> None:
    """Skip on a developer machine without the resource; fail in CI, where it must exist."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI; .ci/run must provide it")
    pytest.skip(f"{what} is not available here")


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 3-layer BERT with a 40-word WordPiece vocabulary, saved to a folder."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=64)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    model = BertModel(config)
    folder = tmp_path_factory.mktemp("tiny-bert")
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_backbone(tiny_bert_dir: Path):
    from iso_bench.backbones.hf_backbone import Backbone, Extraction

    return Backbone(str(tiny_bert_dir), device="cpu", extraction=Extraction(pooling="mean"))


@pytest.fixture(scope="session")
def minilm_backbone():
    """The real all-MiniLM-L6-v2 (laid into the HF cache by offline-models.sh), at mteb's pinned revision."""
    from iso_bench.backbones.base import BackboneError
    from iso_bench.backbones.hf_backbone import Backbone

    try:
        return Backbone(MINILM, "8b3219a92973c328a8e22fadcfa821b5dc75636a", device="cpu")
    except BackboneError as exc:
        _missing(f"{MINILM} ({exc})")


@pytest.fixture(scope="session")
def hub_mirror() -> Path:
    if not (HUB_MIRROR / "mteb" / "stsbenchmark-sts").is_dir():
        _missing(f"the dataset mirror {HUB_MIRROR}")
    return HUB_MIRROR


@pytest.fixture(scope="session")
def max_dense_dir(tmp_path_factory, minilm_backbone) -> Path:
    """all-MiniLM-L6-v2 with max pooling and a seeded 384 -> 256 Dense layer before Normalize (built once per session:
    a session fixture of a test module, imported into another, is built again there)."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    st = SentenceTransformer(MINILM, device="cpu")
    torch.manual_seed(0)
    pipeline = SentenceTransformer(modules=[st[0], models.Pooling(384, pooling_mode="max"), models.Dense(384, 256),
                                            models.Normalize()], device="cpu")
    folder = tmp_path_factory.mktemp("pipelines") / "minilm-max-dense"
    pipeline.save(str(folder))
    return folder


@pytest.fixture(scope="session")
def static_minilm_dir(tmp_path_factory, minilm_backbone) -> Path:
    """A static model distilled from all-MiniLM-L6-v2 by the project's recipe (leaderboards/make_static_model.py)."""
    if importlib.util.find_spec("model2vec") is None:
        _missing("model2vec (pip install 'iso-bench[static]')")
    spec = importlib.util.spec_from_file_location("make_static_model", LEADERBOARDS / "make_static_model.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)  # type: ignore[union-attr]
    return recipe.distill_static(MINILM, tmp_path_factory.mktemp("static") / "static-minilm")


class KeywordBackbone:
    """A hand-checkable encoder: a text's (or span's) vector counts the vocabulary words in it.

    Sentence vectors are the counts of each keyword in the text; token vectors are one-hot rows, one per
    known word; a span's vector is the one-hot row of the word it covers.
    """

    def __init__(self, vocab: list[str]) -> None:
        import types

        self.vocab = {w: i for i, w in enumerate(vocab)}
        self.dim = len(vocab)
        self.extraction = types.SimpleNamespace(key=lambda: "keywords", normalize=False)

    def describe(self) -> dict:
        return {"model": "test/keywords", "revision": "r0", "extraction": {"pooling": "keywords"}}

    def _onehot(self, word: str):
        import numpy as np

        v = np.zeros(self.dim, np.float32)
        if word.lower() in self.vocab:
            v[self.vocab[word.lower()]] = 1
        return v

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        import numpy as np

        out = {}
        if "sentence" in kinds:
            out["sentence"] = [sum((self._onehot(w) for w in t.split()), np.zeros(self.dim, np.float32)) for t in texts]
        if "tokens" in kinds:
            out["tokens"] = [np.stack([self._onehot(w) for w in t.split()]) for t in texts]
        if "span" in kinds:
            out["span"] = [np.stack([self._onehot(t[s:e]) for s, e in ss]) for t, ss in zip(texts, spans, strict=True)]
        return out


@pytest.fixture
def keyword_variant():
    """``keyword_variant(vocab, method="raw")``: an iso-bench variant over a :class:`KeywordBackbone`."""
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore

    def make(vocab: list[str], method: str = "raw") -> VariantEncoder:
        store = EmbeddingStore(KeywordBackbone(vocab), None, kinds=("sentence", "tokens"), progress=False)
        return VariantEncoder(store, method)

    return make


@pytest.fixture(scope="session")
def vector_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One raw-vector cache for the whole test session, so that each text is encoded once."""
    return tmp_path_factory.mktemp("vector-cache")


@pytest.fixture(scope="session")
def llm_standin_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face cache holding random-weight stand-ins of Qwen3-Embedding-0.6B (bfloat16), gte-Qwen2-1.5B-instruct
    (96-d) and e5-mistral-7b-instruct (Llama-style tokenizer) under their real ids at mteb's pinned revisions, their
    tokenizers trained here (``benchmarks/llm_standins.py``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("llm_standins", Path(__file__).resolve().parents[1] / "benchmarks"
                                                  / "llm_standins.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)  # type: ignore[union-attr]
    cache = tmp_path_factory.mktemp("standin-hub")
    maker.lay_standins(cache)
    return cache


@pytest.fixture
def standin_hub(llm_standin_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`llm_standin_cache` as the Hugging Face cache for one test (huggingface_hub's constant, read at each
    load by transformers and sentence-transformers; ``HF_HUB_CACHE`` for subprocesses)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(llm_standin_cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(llm_standin_cache))
    return llm_standin_cache


# Running on several CPUs (pytest-xdist, `-n auto` in pyproject.toml). A test file is one unit of work, so a module's
# fixtures are made once; the files that build a published board share one unit, so each board is computed once.
# Heavy files go first so that no long one starts last.
SHARED_UNITS = {"board": ("test_published_leaderboard.py", "test_html_leaderboard.py", "test_latex.py",
                          "test_readme_snippets.py", "test_fit_rows.py"),
                "static": ("test_one_tokenization.py", "test_pipelines.py", "test_stages_run.py")}
FIRST = ("test_published_leaderboard.py", "test_html_leaderboard.py", "test_integration.py", "test_mteb_tasks.py",
         "test_held_out.py", "test_reproducible.py", "test_mteb_backbone.py", "test_faults.py", "test_full_disk.py")
MAX_WORKERS = 4  # each worker imports torch and builds its own session fixtures: memory, not CPUs, sets the cap


def _path(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    name = _path(nodeid).rsplit("/", 1)[-1]
    return next((unit for unit, files in SHARED_UNITS.items() if name in files), _path(nodeid))


def pytest_collection_modifyitems(items) -> None:
    def rank(item):
        name = _path(item.nodeid).rsplit("/", 1)[-1]
        return FIRST.index(name) if name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: a file's tests keep their order


def pytest_xdist_auto_num_workers(config) -> int:
    from iso_bench.checks import _cpus  # the CPUs this process may run on, as the threads' defaults count them

    return min(_cpus(), MAX_WORKERS)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedUnits(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return SharedUnits(config, log)
