"""Distinct models keep distinct names on disk, and no written file holds the machine's paths: two local folders
whose names differ only beyond ASCII (``dup ñ``, ``dup 模型``) are two models with two result folders and their own
job records; ASCII slugs are as before (cache namespaces and published folders use them); a variant's
``model_meta.json`` names a local folder ``local/<name>`` and leaves the data folder out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iso_bench.files import slug
from iso_bench.grid.jobs import attempts_file
from tests.conftest import small_mirror


def test_slugs_of_distinct_models_differ_and_ascii_slugs_are_unchanged() -> None:
    assert slug("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers__all-MiniLM-L6-v2"
    assert slug("local/static-all-MiniLM-L6-v2") == "local__static-all-MiniLM-L6-v2"
    assert slug("/data/a/m") == "data__a__m" != slug("/data/b/m")
    assert slug("/x/dup ñ").startswith("x__dup-") and slug("/x/dup ñ") != slug("/x/dup 模型")
    assert attempts_file("r", "/x/dup ñ", "STS12") != attempts_file("r", "/x/dup 模型", "STS12")


def test_a_variants_meta_names_a_local_folder_by_its_name_and_no_path(tmp_path: Path) -> None:
    from iso_bench.mteb_plugin import variant_meta
    from iso_bench.results.result_files import meta_text

    folder = tmp_path / "models" / "my-model"
    folder.mkdir(parents=True)
    meta = variant_meta(str(folder), "whiten", revision="local-abc", experiment={"fit_corpus": "wiki.txt"},
                        fit_corpus="file", seed=0,
                        fit_corpus_path=str(tmp_path / "wiki.txt"), data_dir=str(tmp_path / "data"))
    written = json.loads(meta_text(meta))
    assert written["loader_kwargs"] == {"base_model": "local/my-model", "method": "whiten", "fit_corpus": "file",
                                        "seed": 0, "fit_corpus_path": "wiki.txt"}
    assert written["adapted_from"] == "local/my-model" and str(tmp_path) not in meta_text(meta)
    assert meta.loader_kwargs["base_model"] == str(folder)  # the registered meta still loads the folder


@pytest.mark.slow
def test_two_folders_named_apart_beyond_ascii_are_two_models(tiny_bert_dir: Path, tmp_path: Path, capsys) -> None:
    from iso_bench.cli import main

    mirror = small_mirror(tmp_path / "mirror", ["sts12-sts"], 40)
    models = [tmp_path / "dup ñ", tmp_path / "dup 模型"]
    for folder in models:
        shutil.copytree(tiny_bert_dir, folder)
    results = tmp_path / "results"
    assert main(["run", "--model", *map(str, models), "--methods", "raw", "--tasks", "STS12", "--data-dir",
                 str(mirror), "--results", str(results), "--cache-dir", str(tmp_path / "cache"), "--threads", "1",
                 "--no-progress"]) == 0
    said = capsys.readouterr()
    assert "ran 2 times" not in said.out + said.err
    assert sorted(p.name for p in (results / "results").iterdir()) == ["local__dup_ñ+raw", "local__dup_模型+raw"]


def test_look_alike_names_get_sections_told_apart(tmp_path: Path) -> None:
    """``local/café`` written as NFC and as NFD: two models with results of their own, which look alike; the board
    titles their sections (and keys their plots) by the form each is written in (the verdict and its heatmap name
    the models by those titles)."""
    import unicodedata

    from iso_bench.report import build_leaderboard, read_results, render_markdown
    from tests.report_helpers import write_result

    nfc, nfd = "local/caf\u00e9", "local/cafe\u0301"
    assert nfc != nfd and unicodedata.normalize("NFC", nfd) == nfc
    for base, (raw, whiten) in ((nfc, (0.70, 0.74)), (nfd, (0.60, 0.58))):
        write_result(tmp_path, base, "raw", "STS12", raw)
        write_result(tmp_path, base, "whiten", "STS12", whiten)
    board = build_leaderboard(read_results(tmp_path), ci=False)
    titles = [s.title for s in board.sections if s.title.startswith("local/")]
    assert sorted(titles) == sorted([f"{nfc} [Unicode NFC]", f"{nfd} [Unicode NFD]"])
    assert len({s.key for s in board.sections}) == len(board.sections)  # a plot and an anchor each
    markdown = render_markdown(board)
    assert f"## {nfc} [Unicode NFC]" in markdown and f"## {nfd} [Unicode NFD]" in markdown
    alone = tmp_path / "alone"
    write_result(alone, nfc, "raw", "STS12", 0.70)
    assert build_leaderboard(read_results(alone), ci=False).sections[0].title == nfc  # no look-alike: as it is
