"""Result integrity: every ``iso_bench`` record carries the digest of its score entry; the leaderboard refuses
a result edited after its run (or renders it marked †) and marks a result without a digest unverified (°);
result files are written whole or not at all; a run repairs a garbled ``model_meta.json`` and sets a garbled
result aside, so that it is computed again.

Most tests evaluate a keyword-count variant on a six-pair STS task through the real ``mteb.evaluate`` (fast);
one evaluates all-MiniLM-L6-v2+raw on the STSBenchmark mirror (slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.cli import main
from iso_bench.report import LeaderboardError, read_results, write_leaderboard
from iso_bench.results.result_files import (
    DIGEST,
    check_entry,
    ensure_model_meta,
    identity,
    meta_text,
    result_digest,
    set_aside_garbled,
)
from tests.conftest import MINILM, SHARED_DATA, KeywordBackbone
from tests.report_helpers import REV, identity_of, small_case, write_result

ROOT = Path(__file__).resolve().parents[1]
VOCAB = "cat dog sat mat bank river money guitar piano man woman music".split()
PAIRS = [("cat sat", "cat mat", 4.0), ("dog sat mat", "dog", 3.0), ("bank river", "river", 2.5),
         ("money bank", "money", 4.5), ("man guitar", "man music", 1.0), ("woman piano music", "woman piano", 5.0)]


def make_variant():
    """``test/keywords+raw``: a variant over a keyword-count backbone, with its ModelMeta (setup ``data=mirror``)."""
    from iso_bench.encoder import VariantEncoder
    from iso_bench.mteb_plugin import install_result_hook, variant_meta
    from iso_bench.vectors.store import EmbeddingStore

    install_result_hook()
    variant = VariantEncoder(EmbeddingStore(KeywordBackbone(VOCAB), None, kinds=("sentence",), progress=False), "raw")
    variant.mteb_model_meta = variant_meta("test/keywords", "raw", revision="r0", experiment={"data": "mirror"})
    return variant


def evaluate(variant, results: Path, **kwargs):
    """``mteb.evaluate`` of ``variant`` on STSBenchmark holding :data:`PAIRS` as its test split, into ``results``."""
    import datasets
    import mteb

    task = mteb.get_task("STSBenchmark")
    s1, s2, gold = zip(*PAIRS, strict=True)
    task.dataset = datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"sentence1": list(s1), "sentence2": list(s2), "score": list(gold)})})
    task.data_loaded = True
    return mteb.evaluate(variant, task, cache=mteb.ResultCache(results), show_progress_bar=False, **kwargs)


def result_file(results: Path, task: str = "STSBenchmark") -> Path:
    """The one result file of ``task``: in an experiment folder, or a plain one (a setup of nothing but defaults)."""
    (path,) = [p for pattern in (f"*/*/experiments/*/{task}.json", f"*/*/{task}.json")
               for p in (results / "results").glob(pattern)]
    return path


def entries(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["scores"]["test"]


def md_row(markdown: str, label: str) -> list[str]:
    """The cells of the first markdown table row labelled ``label``."""
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {label} "))
    return [cell.strip() for cell in row.strip("|").split("|")]


@pytest.fixture
def variant():
    return make_variant()


# ---- the digest -------------------------------------------------------------------------------------


def test_the_digest_written_is_the_digest_of_the_entry_read_back(tmp_path: Path, variant) -> None:
    (task_result,) = evaluate(variant, tmp_path).task_results
    (entry,) = entries(result_file(tmp_path))
    digest = entry["iso_bench"][DIGEST]
    ident = identity("test/keywords+raw", "r0", {"data": "mirror"}, "STSBenchmark")
    assert identity_of(result_file(tmp_path)) == ident  # what a reader finds is what was digested
    assert len(digest) == 64 and digest == result_digest(entry, ident) and check_entry(entry, ident) == "verified"
    assert task_result.scores["test"][0]["iso_bench"][DIGEST] == digest  # what mteb.evaluate returns says the same
    assert entry["iso_bench"]["variant"]["method"] == "raw" and entry["iso_bench"]["task_type"] == "STS"
    assert result_digest({**entry, "main_score": entry["main_score"] + 1e-6}, ident) != digest
    for changed in ({"model": "test/other+raw"}, {"revision": "r1"}, {"setup": {"data": "hub"}}, {"task": "STS12"}):
        assert check_entry(entry, {**ident, **changed}) == "modified", changed
    record = {**entry["iso_bench"], "command": "iso-bench run --model test/other"}
    assert check_entry({**entry, "iso_bench": record}, ident) == "modified"  # any field of the provenance
    assert [r.check for r in read_results(tmp_path)] == ["verified"]


def test_a_variant_result_is_written_with_mtebs_own_bytes(tmp_path: Path, variant) -> None:
    """The same TaskResult saved for the variant (iso-bench's atomic writes) and for an untracked copy of its
    ModelMeta (mteb's own save_to_cache): the same bytes in all three files."""
    import mteb

    (task_result,) = evaluate(variant, tmp_path / "run").task_results
    kwargs = {"encode_kwargs": {"batch_size": 8}}
    mteb.ResultCache(tmp_path / "ours").save_to_cache(task_result, variant.mteb_model_meta, **kwargs)
    mteb.ResultCache(tmp_path / "mteb").save_to_cache(task_result, variant.mteb_model_meta.model_copy(), **kwargs)
    ours, theirs = result_file(tmp_path / "ours").parent, result_file(tmp_path / "mteb").parent
    for name in ("STSBenchmark.json", "model_meta.json", "run_settings.jsonl"):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    assert (ours / "model_meta.json").read_text() == meta_text(variant.mteb_model_meta)
    assert sorted(p.name for p in ours.iterdir()) == ["STSBenchmark.json", "model_meta.json", "run_settings.jsonl"]


def test_model_meta_lists_training_datasets_in_one_order() -> None:
    """mteb lists a meta's ``training_datasets`` (a set) in the process's hash order, so the same variant's
    ``model_meta.json`` changed bytes from run to run; iso-bench writes the names sorted, all of them."""
    from iso_bench.mteb_plugin import variant_meta

    meta = variant_meta("sentence-transformers/all-mpnet-base-v2", "whiten", experiment={"fit_corpus": "task"})
    names = json.loads(meta_text(meta))["training_datasets"]
    assert len(names) > 2 and names == sorted(meta.to_dict()["training_datasets"])
    assert set(names) == meta.training_datasets


@pytest.mark.slow
def test_minilm_raw_on_the_mirror_round_trips(tmp_path: Path, minilm_backbone, vector_cache) -> None:
    import mteb

    import iso_bench  # noqa: F401 - registers the variants
    from iso_bench.data.sources import get_task

    model = mteb.get_model(f"{MINILM}+raw", cache_dir=str(vector_cache), data_dir=str(SHARED_DATA))
    mteb.evaluate(model, get_task("STSBenchmark", SHARED_DATA), cache=mteb.ResultCache(tmp_path),
                  show_progress_bar=False)
    (entry,) = entries(result_file(tmp_path))
    assert entry["iso_bench"][DIGEST] == result_digest(entry, identity_of(result_file(tmp_path)))
    assert entry["iso_bench"]["revision"] == REV_MINILM
    (result,) = read_results(tmp_path)
    assert result.check == "verified" and result.main_score == pytest.approx(0.8203, abs=5e-4)


REV_MINILM = "8b3219a92973c328a8e22fadcfa821b5dc75636a"


# ---- the leaderboard ----------------------------------------------------------------------------------


def _edit_main_score(path: Path, value: float) -> None:
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["main_score"] = value
    path.write_text(json.dumps(data, indent=2))


def test_a_hand_edited_result_is_refused_naming_the_file(tmp_path: Path, capsys) -> None:
    small_case(tmp_path)
    edited = tmp_path / "results" / "org__alpha+raw" / REV / "STS12.json"
    _edit_main_score(edited, 0.99)
    with pytest.raises(LeaderboardError) as info:
        read_results(tmp_path)
    assert str(info.value).startswith(f"{edited}: its scores, model name, setup or provenance no longer match the "
                                      "digest written with them")
    assert "--accept-modified" in str(info.value)
    with pytest.raises(LeaderboardError, match="pass --accept-modified"):
        write_leaderboard(tmp_path)
    assert main(["leaderboard", str(tmp_path)]) == 2
    assert str(edited) in capsys.readouterr().err


def test_a_hand_edited_result_is_rendered_marked_with_accept_modified(tmp_path: Path, capsys) -> None:
    """raw's STS12 edited to 0.99: its cell, its mean, and every difference taken from it are marked †; the
    cells computed from untouched results only are not. A modified value is never bold (never best)."""
    small_case(tmp_path)
    _edit_main_score(tmp_path / "results" / "org__alpha+raw" / REV / "STS12.json", 0.99)
    assert {r.variant: r.check for r in read_results(tmp_path, accept_modified=True) if r.task == "STS12"} == {
        "raw": "modified", "whiten": "verified", "abtt": "verified"}
    markdown = write_leaderboard(tmp_path, accept_modified=True)
    assert md_row(markdown, "raw")[:4] == ["raw", "99.00†", "**82.03**", "90.52†"]  # never bold: modified
    assert md_row(markdown, "abtt")[:2] == ["abtt", "**72.37 (−26.63)**†"]  # the best of the others
    assert md_row(markdown, "whiten")[:4] == ["whiten", "65.47 (−33.53)†", "79.93 (−2.10)", "**72.70 (−17.82)**†"]
    legend = ("- † = modified: computed from a result file whose scores, model name, setup or provenance no longer "
              "match the digest written with them")
    assert legend in markdown and f"--accept-modified (org__alpha+raw/{REV}/STS12.json)." in markdown
    assert "° = unverified" not in markdown
    csv = write_leaderboard(tmp_path, fmt="csv", accept_modified=True).splitlines()
    assert ",best,check," in csv[0]
    assert ",99.00,,0,modified," in next(line for line in csv if ",raw,,STS12," in line)
    assert ",79.93,-2.10,0,verified," in next(line for line in csv if ",whiten,,STSBenchmark," in line)
    latex = write_leaderboard(tmp_path, fmt="latex", accept_modified=True)
    assert r"99.00$^\dagger$" in latex and r"\textbf{99.00}" not in latex and r"$^\dagger$ = modified" in latex
    assert main(["leaderboard", str(tmp_path), "--accept-modified", "--no-plot"]) == 0
    assert md_row(capsys.readouterr().out, "raw")[1] == "99.00†"


def test_results_without_a_digest_are_unverified_never_refused(tmp_path: Path) -> None:
    """A record without a digest, and a file with no record at all (mteb's own models)."""
    write_result(tmp_path, "org/alpha", "raw", "STS12", 0.7237)
    write_result(tmp_path, "org/alpha", "abtt", "STS12", 0.70, digest=False)
    bare = write_result(tmp_path, "org/alpha", "center", "STS12", 0.71)
    data = json.loads(bare.read_text())
    del data["scores"]["test"][0]["iso_bench"]
    bare.write_text(json.dumps(data))
    assert {r.variant: r.check for r in read_results(tmp_path)} == {
        "raw": "verified", "abtt": "unverified", "center": "unverified"}
    markdown = write_leaderboard(tmp_path)
    assert md_row(markdown, "raw")[:2] == ["raw", "**72.37**"]
    assert md_row(markdown, "abtt")[:2] == ["abtt", "70.00 (−2.37)°"]
    assert md_row(markdown, "center")[:2] == ["center", "71.00 (−1.37)°"]
    assert "- ° = unverified: computed from a result file without a digest (written by an early" in markdown
    assert "† = modified" not in markdown
    csv = write_leaderboard(tmp_path, fmt="csv")
    assert ",abtt,,STS12,70.00,-2.37,0,unverified" in csv and ",raw,,STS12,72.37,,1,verified" in csv
    assert r"70.00$^{\circ}$ \\ ($-$2.37)" in write_leaderboard(tmp_path, fmt="latex")


def _relabel(root: Path, old: str, new: str) -> Path:
    """Relabel a model's results in all three places a reader sees: the folder's name, ``model_meta.json``'s
    name and the ``model`` of every record; returns the new folder."""
    folder = root / "results" / old.replace("/", "__")
    target = folder.with_name(new.replace("/", "__"))
    folder.rename(target)
    for meta in target.glob("*/model_meta.json"):
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "name": new}))
    for path in target.glob("*/*.json"):
        if path.name != "model_meta.json":
            data = json.loads(path.read_text())
            for entry in data["scores"]["test"]:
                entry["iso_bench"]["model"] = new.rpartition("+")[0]
            path.write_text(json.dumps(data, indent=2))
    return target


def test_a_relabelled_result_is_refused_and_rendered_marked_with_accept_modified(tmp_path: Path, capsys) -> None:
    """org/alpha's raw results relabelled org/beta in the folder name, model_meta.json and the records: the
    scores are untouched, yet the leaderboard refuses them, and renders them marked † only when asked."""
    small_case(tmp_path)
    target = _relabel(tmp_path, "org/alpha+raw", "org/beta+raw")
    with pytest.raises(LeaderboardError) as info:
        read_results(tmp_path)
    assert str(info.value).startswith(f"{target / REV}/")
    assert "model name, setup or provenance no longer match" in str(info.value)
    assert main(["leaderboard", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iso-bench: error: ") and "Traceback" not in err
    found = {(r.base, r.variant, r.task): r.check for r in read_results(tmp_path, accept_modified=True)}
    assert found[("org/beta", "raw", "STS12")] == "modified" and found[("org/alpha", "whiten", "STS12")] == "verified"
    markdown = write_leaderboard(tmp_path, accept_modified=True, plot=False)
    beta = markdown[markdown.index("org/beta"):]
    assert md_row(beta, "raw")[:3] == ["raw", "72.37†", "82.03†"]  # modified: never bold


def test_a_result_moved_to_another_setup_is_modified(tmp_path: Path) -> None:
    """A result file copied into another setup's experiment folder is not that setup's result."""
    path = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.65, setup={"fit_corpus": "task", "seed": 0})
    other = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.66, setup={"fit_corpus": "task", "seed": 1})
    other.write_bytes(path.read_bytes())
    found = {r.setup["seed"]: r.check for r in read_results(tmp_path, accept_modified=True)}
    assert found == {0: "verified", 1: "modified"}


def test_results_with_the_older_scores_only_digest_are_marked_never_refused(tmp_path: Path) -> None:
    """iso-bench 0.1 digested the scores only: such a result renders marked ‡ (older), and one whose scores
    were edited is still refused."""
    write_result(tmp_path, "org/alpha", "raw", "STS12", 0.7237)
    older = write_result(tmp_path, "org/alpha", "abtt", "STS12", 0.70, digest="older")
    assert {r.variant: r.check for r in read_results(tmp_path)} == {"raw": "verified", "abtt": "older"}
    markdown = write_leaderboard(tmp_path, plot=False)
    assert md_row(markdown, "abtt")[:2] == ["abtt", "70.00 (−2.37)‡"]
    assert md_row(markdown, "raw")[:2] == ["raw", "**72.37**"]
    assert "- ‡ = older: computed from a result file of iso-bench 0.1, whose digest" in markdown
    assert ",abtt,,STS12,70.00,-2.37,0,older" in write_leaderboard(tmp_path, fmt="csv")
    _edit_main_score(older, 0.71)
    with pytest.raises(LeaderboardError, match="no longer match"):
        read_results(tmp_path)


# ---- repairs and atomic writes ------------------------------------------------------------------------


def test_ensure_model_meta_rewrites_a_garbled_missing_or_foreign_file(tmp_path: Path, variant) -> None:
    import mteb

    cache, meta = mteb.ResultCache(tmp_path), variant.mteb_model_meta
    assert ensure_model_meta(cache, meta) is False and not (tmp_path / "results").exists()  # nothing run yet
    evaluate(variant, tmp_path)
    path = result_file(tmp_path).parent / "model_meta.json"
    good = path.read_bytes()
    assert ensure_model_meta(cache, meta) is False and path.read_bytes() == good
    path.write_bytes(good[: len(good) // 2])  # cut short, as by a kill in the middle of mteb's write
    with pytest.raises(LeaderboardError, match="not a readable JSON file"):
        read_results(tmp_path)
    assert ensure_model_meta(cache, meta) is True and path.read_bytes() == good
    assert [(r.variant, r.setup) for r in read_results(tmp_path)] == [("raw", {"data": "mirror"})]
    foreign = json.dumps({**json.loads(good), "experiment_kwargs": {"data": "hub"}})
    for damage in (lambda: path.unlink(), lambda: path.write_text(foreign), lambda: path.write_text("[]")):
        damage()
        assert ensure_model_meta(cache, meta) is True and path.read_bytes() == good


def test_a_garbled_result_is_set_aside_and_computed_again(tmp_path: Path, variant) -> None:
    import mteb

    cache, meta = mteb.ResultCache(tmp_path), variant.mteb_model_meta
    first = evaluate(variant, tmp_path).task_results[0].get_score()
    path = result_file(tmp_path)
    cut = path.read_text()[:400]
    path.write_text(cut)
    with pytest.raises(ValueError):  # mteb reads the file to see what is missing and stops on it
        evaluate(variant, tmp_path, overwrite_strategy="only-missing", raise_error=False)
    assert set_aside_garbled(cache, meta) == [path.with_name("STSBenchmark.json.garbled")]
    assert path.with_name("STSBenchmark.json.garbled").read_text() == cut and not path.exists()
    evaluate(variant, tmp_path, overwrite_strategy="only-missing")
    (entry,) = entries(path)
    assert check_entry(entry, identity_of(path)) == "verified" and entry["main_score"] == round(first, 6)
    assert set_aside_garbled(cache, meta) == []  # a readable result is left alone
    path.write_text("{")
    assert set_aside_garbled(cache, meta) == [path.with_name("STSBenchmark.json.garbled-2")]


def test_stale_temporary_files_are_deleted_and_never_read(tmp_path: Path, variant) -> None:
    import mteb

    evaluate(variant, tmp_path)
    folder = result_file(tmp_path).parent
    stale, older, fresh = (folder / name for name in (".STS12.json-a1b2.tmp", ".tmp-c3d4.json", ".STS13.json-e5.tmp"))
    for path in (stale, older, fresh):
        path.write_text('{"task_name": "STS1')
    for path in (stale, older):
        os.utime(path, (1e9, 1e9))
    assert [r.task for r in read_results(tmp_path)] == ["STSBenchmark"]  # none is read as a result
    assert set_aside_garbled(mteb.ResultCache(tmp_path), variant.mteb_model_meta) == []
    assert not stale.exists() and not older.exists() and fresh.exists()  # fresh: maybe a write in progress


def test_temporary_files_of_a_writer_that_is_gone_are_deleted_at_once(tmp_path: Path, variant) -> None:
    """A temporary name carries its writer's host and pid: on this host, one of a dead process goes, one of a
    live process stays (another host's: tests/test_temporaries.py)."""
    import mteb

    from iso_bench.files import host_name

    evaluate(variant, tmp_path)
    folder = result_file(tmp_path).parent
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = folder / f".STS12.json@{host_name()}@{int(dead.stdout)}-ab12cd34.tmp"
    alive = folder / f".STS13.json@{host_name()}@{os.getpid()}-x.tmp"
    for path in (gone, alive):
        path.write_text('{"task_name": "STS1')
    assert set_aside_garbled(mteb.ResultCache(tmp_path), variant.mteb_model_meta) == []
    assert not gone.exists() and alive.exists()


def test_a_json_file_that_is_not_a_result_is_set_aside_saying_so(tmp_path: Path, variant, caplog) -> None:
    import mteb

    evaluate(variant, tmp_path)
    stray = result_file(tmp_path).with_name("STS12.json")
    stray.write_text('{"hello": 1}')
    with caplog.at_level("WARNING"):
        assert set_aside_garbled(mteb.ResultCache(tmp_path), variant.mteb_model_meta) == [
            stray.with_name("STS12.json.garbled")]
    assert f"{stray} is a JSON object but not an mteb task result" in caplog.text
    assert "move it out of the results folder if it is a file of yours" in caplog.text


CRASH = """
import sys
from pathlib import Path
from tests.test_integrity import evaluate, make_variant
evaluate(make_variant(), Path(sys.argv[1]))
"""


@pytest.mark.parametrize("point", ["result-write", "between-results"])
def test_a_run_killed_while_writing_leaves_whole_files_only(tmp_path: Path, point: str) -> None:
    import mteb

    env = {**os.environ, "ISO_BENCH_FAULT": point, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                          timeout=300, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    (folder,) = (tmp_path / "results").glob("*/*/experiments/*")
    meta = make_variant().mteb_model_meta
    assert (folder / "model_meta.json").read_text() == meta_text(meta)  # written whole, before the result
    if point == "result-write":  # killed with half of the result's bytes in a temporary file
        assert not (folder / "STSBenchmark.json").exists() and len(list(folder.glob(".STSBenchmark.json*"))) == 1
        with pytest.raises(LeaderboardError, match="no result files"):
            read_results(tmp_path)
        assert set_aside_garbled(mteb.ResultCache(tmp_path), meta, stale_after=0) == []
        assert sorted(p.name for p in folder.iterdir()) == ["STSBenchmark.instances.npz", "model_meta.json"]
    else:  # killed after the result, its model_meta.json and run settings were written
        assert [r.check for r in read_results(tmp_path)] == ["verified"]
        assert sorted(p.name for p in folder.iterdir()) == ["STSBenchmark.instances.npz", "STSBenchmark.json",
                                                           "model_meta.json", "run_settings.jsonl"]
