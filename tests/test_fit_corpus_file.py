"""A fit corpus file is one text per line, where lines end at ``\\n`` (or ``\\r\\n``) only; what it holds and
what a bad one is are said in terms of its lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iso_bench.data.fit_corpus import FitCorpus, FitCorpusError, read_text_file
from iso_bench.encoder import VariantEncoder

# every character str.splitlines breaks at besides \n and \r
BREAKS = ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85"]


def test_a_line_with_unicode_line_separators_inside_is_one_text(tmp_path: Path) -> None:
    lines = [f"left {ch} right {i}" for i, ch in enumerate(BREAKS * 50)]  # 400 lines, each with a break inside
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = FitCorpus.from_file(path)
    assert len(corpus.texts) == 400 and corpus.to_record()["n_texts"] == 400
    assert corpus.texts[1] == "left \u2029 right 1" and corpus.record["n_lines"] == 400


def test_crlf_and_a_missing_final_newline_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"a cat\r\n\r\n  a dog  \r\nthe end")
    assert read_text_file(path) == ["a cat", "a dog", "the end"]


def test_repeated_lines_are_said_as_lines_and_distinct_texts(tmp_path: Path) -> None:
    path = tmp_path / "same.txt"
    path.write_text("the same line\n" * 2000, encoding="utf-8")
    corpus = FitCorpus.from_file(path)
    assert corpus.describe() == "2000 lines, 1 distinct texts" and corpus.to_record()["n_lines"] == 2000
    variant = VariantEncoder(None, "whiten", corpus=str(path))
    variant._fit_matrix = lambda corpus, level: np.ones((1, 4))  # one distinct text: one vector
    with pytest.raises(Exception, match=r"2000 lines, 1 distinct texts, 1 sentence vectors"):
        variant.fitted_method(None)


def test_a_folder_is_named_a_folder(tmp_path: Path) -> None:
    with pytest.raises(FitCorpusError, match=rf"fit corpus {tmp_path} is a folder, not a file"):
        read_text_file(tmp_path)


def test_invalid_utf8_is_located_by_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"one\ntwo\nthr\xffee\n")
    with pytest.raises(FitCorpusError) as info:
        read_text_file(path)
    assert f"fit corpus file {path}:3: not valid UTF-8" in str(info.value)


def test_the_record_holds_every_resolved_parameter_of_the_method() -> None:
    """Defaults included, so that a default changed later shows in the results written before."""
    assert VariantEncoder(None, "whiten-256").config()["params"] == {"n_components": 256, "eps": 0.0}
    params = VariantEncoder(None, "cluster-pca", seed=3).config()["params"]
    assert params == {"n_clusters": 27, "n_directions": 12, "algorithm": "kmeans", "init": "points", "seed": 3}
