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
