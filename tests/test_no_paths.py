"""No written file holds the machine's folders: a small real run (a local model folder, a data folder, a fit
corpus file, all given by absolute paths), an export of one of its variants and a submission of its results are
read back byte by byte (compressed files as they are, never decompressed) for the working folder, the data
folder and the temporary folder (and the home folder, the Python environment and the checkout), and none of them
is there. Records name a local folder ``local/<name>`` with its content digest, a corpus file by its name and
SHA-256, and the recorded command the data folder ``DATA``."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import MINILM, WORDS, small_mirror

pytestmark = pytest.mark.slow


def _corpus(path: Path, n: int = 60) -> Path:
    """``n`` distinct lines of the tiny BERT's words, a corpus to fit on."""
    words = [w for w in WORDS if w.isalpha()]
    lines = [" ".join(words[(i * k) % len(words)] for k in (1, 3, 7, 11)) + f" {i}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pipeline(bert: Path, folder: Path) -> Path:
    """The tiny BERT as a sentence-transformers folder (Transformer, mean Pooling): a model ``export`` takes."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    bert_module = Transformer(str(bert))
    SentenceTransformer(modules=[bert_module, Pooling(16, pooling_mode="mean")], device="cpu").save(str(folder))
    return folder


def _holding(folders: list[Path], needles: set[str]) -> dict[str, list[str]]:
    """Every file under ``folders`` whose bytes hold one of ``needles``, with the needles it holds."""
    found: dict[str, list[str]] = {}
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            hits = sorted(n for n in needles if n.encode("utf-8") in data)
            if hits:
                found[str(path)] = hits
    return found


def test_a_run_an_export_and_a_submission_write_no_folder_of_the_machine(
        tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iso_bench.cli import main

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    mirror = small_mirror(work / "data", ["sts12-sts"], 40)
    model = _pipeline(tiny_bert_dir, work / "my model")
    corpus = _corpus(work / "corpus.txt")
    results, exported, submitted = work / "results", work / "exported", work / "submission"
    speed = ["--cache-dir", str(tmp_path / "cache"), "--threads", "1", "--no-progress"]
    assert main(["run", "--model", MINILM, str(model), "--methods", "raw", "zscore", "--tasks", "STS12", "--data-dir",
                 str(mirror), "--fit-corpus", str(corpus), "--results", str(results), *speed]) == 0
    assert main(["export", f"{model}+zscore", "--fit-corpus", str(corpus), "-o", str(exported), *speed]) == 0
    assert main(["submission", str(results), "-o", str(submitted)]) == 0

    machine = (work, mirror, Path(tempfile.gettempdir()), Path.home(), Path(sys.prefix), Path(__file__).parents[1])
    needles = {str(p) for folder in machine for p in (folder, folder.resolve()) if p.parent != p}  # never "/"
    written = [results, exported, submitted]
    assert sum(1 for f in written for p in f.rglob("*.json")) > 10  # the run's, the export's, the submission's
    assert _holding(written, needles) == {}

    # what they record instead: the folder by its name and digest, the corpus by its name and SHA-256, DATA
    found = list((results / "results" / "local__my_model+zscore").rglob("STS12.json"))
    assert len(found) == 1
    record = json.loads(found[0].read_text())["scores"]["test"][0]["iso_bench"]
    digest = hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert (record["fit"]["path"], record["fit"]["sha256"], record["variant"]["fit_corpus"]) == (
        "corpus.txt", digest, "corpus.txt")
    assert record["model"] == "local/my model" and record["revision"].startswith("local-")
    assert (record["data"]["repo"], record["data"]["source"], record["data"]["path"]) == (
        "mteb/sts12-sts", "mirror", "mteb/sts12-sts")
    assert record["command"] == ("iso-bench run --model './my model' --methods raw zscore --tasks STS12 "
                                 "--data-dir DATA --fit-corpus ./corpus.txt")
    transform = json.loads((exported / "iso_bench_transform.json").read_text())
    assert (transform["base_model"]["model"], transform["fit_corpus"]["path"]) == ("local/my model", "corpus.txt")
    assert transform["command"] == "iso-bench export './my model+zscore' --fit-corpus ./corpus.txt -o ./exported"
