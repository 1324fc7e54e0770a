"""iso-bench v3 (and v2 and v1, frozen): a named benchmark version, registered with mteb, recorded in every result,
printed on the leaderboard with the citation to use."""

from __future__ import annotations

import subprocess
import sys
import types

from iso_bench.results.benchmark import (
    DEFAULT_METHODS,
    NAME,
    STORAGE_METHODS,
    V1,
    V2,
    bibtex,
    current_definition,
    definition,
    definition_sha256,
    result_record,
)

V1_SHA256 = "853d756f7d4b9dc7242d806b5eb0ebf3c06d76bbc67d28b991df3638903ba9fa"  # as the v1 boards print it
V2_SHA256 = "3bf93169cd50f0ce1d9a068aab93b653c458301db64bf15690332f5ac738ae58"  # as the v2 results record it
V3_SHA256 = "22bb4600093e64767d7cbd5eae0de28ce6fc0448d27ac7747aac2fdb03f5f9df"  # as the v3 results record it


def test_importing_iso_bench_loads_no_mteb_and_mteb_then_knows_the_benchmark() -> None:
    code = ("import sys, iso_bench; assert 'mteb' not in sys.modules, 'mteb loaded'; import mteb; "
            f"b = mteb.get_benchmark({NAME!r}); print(' '.join(t.metadata.name for t in b.tasks)); "
            "print(b.citation.splitlines()[0]); "
            f"print(*(mteb.get_benchmark(n).description.rsplit(' ', 1)[-1] for n in {(V2, V1)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    from iso_bench.kinds.cards import suites

    assert out[0].split() == list(suites()["all"])  # the all suite, in card order
    assert out[1] == "@software{isobench2026,"
    assert out[2].split() == [V2_SHA256 + ".", V1_SHA256 + "."]  # the earlier versions stay mteb's too


def test_mteb_finds_the_benchmark_when_its_registry_was_built_before_iso_bench_was_imported() -> None:
    code = ("import mteb; mteb.get_benchmark('MTEB(eng, v2)'); import iso_bench; "
            f"print(len(mteb.get_benchmark({NAME!r}).tasks))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    from iso_bench.kinds.cards import suites

    assert int(out.split()[-1]) == len(suites()["all"])


def test_the_definition_names_tasks_main_scores_protocol_and_resolved_method_defaults() -> None:
    d = definition()
    by_task = {t["task"]: t for t in d["tasks"]}
    assert by_task["STSBenchmark"]["main_score"] == "cosine Spearman" and by_task["STSBenchmark"]["ranked"]
    assert not by_task["Isotropy-STSB"]["ranked"]  # diagnostics: never ranked
    assert d["fit_corpora"] == ["task", "held-out"] and d["resamples"] == 1000
    assert by_task["STSBenchmark"]["held_out"] == "train" and by_task["STS12"]["held_out"] == "semcor"
    assert {"Banking77Classification", "SciFact"} <= set(by_task) and by_task["SciFact"]["ranked"]
    assert d["methods"]["mean-proj"] == {"method": "mean-proj", "level": "sentence", "params": {}}
    assert d["methods"]["whiten-256"] == {"method": "whiten", "level": "sentence",
                                          "params": {"n_components": 256, "eps": 0.0}}
    assert d["methods"]["cluster-pca"]["level"] == "token" and d["methods"]["cluster-pca"]["params"]["n_clusters"] == 27
    assert len(definition_sha256()) == 64 and definition_sha256()[:12] in bibtex()


def test_v1_is_frozen_whatever_the_cards_and_default_methods_now_say() -> None:
    """v1 had neither mean-proj nor Banking77/SciFact nor the held-out setting; its definition is data, so its
    SHA-256 is the one its boards and results record, while v2's is computed from today's cards and methods."""
    v1 = definition(V1)
    assert definition_sha256(V1) == V1_SHA256 and v1["name"] == V1 and v1["fit_corpus"] == "task"
    assert "mean-proj" not in v1["methods"] and "mean-proj" in DEFAULT_METHODS
    assert "SciFact" not in {t["task"] for t in v1["tasks"]} and len(v1["tasks"]) == 17
    assert definition_sha256() != V1_SHA256 and "v3" in bibtex() and V1_SHA256[:12] in bibtex(V1)
    v1["name"] = "changed"  # a copy: the frozen definition cannot be changed through it
    assert definition_sha256(V1) == V1_SHA256


def test_v2_is_frozen_without_the_bytes_axis_whatever_the_methods_now_say() -> None:
    """v2 had the 13 default methods and no storage stage, and its token-level variants pooled by a plain mean: its
    definition is data, so its SHA-256 is the one every v2 result records."""
    v2 = definition(V2)
    assert definition_sha256(V2) == V2_SHA256 and v2["name"] == V2 and list(v2["methods"]) == sorted(DEFAULT_METHODS)
    assert "token_level" not in v2 and "storage" not in v2 and v2["fit_corpora"] == ["task", "held-out"]
    assert {t["task"] for t in v2["tasks"]} == {t["task"] for t in definition()["tasks"]}  # v3 keeps v2's tasks
    assert "v2" in bibtex(V2) and V2_SHA256[:12] in bibtex(V2)


def test_v3_is_frozen_and_today_s_cards_and_methods_still_define_it(monkeypatch) -> None:
    """v3 is read from its file, so its SHA-256 is the one every v3 result records; the definition computed from
    today's cards, default methods and bytes axis equals it (a change to any is a new version), and a changed
    default changes the computed definition, never the frozen one."""
    assert definition_sha256() == V3_SHA256 and definition(NAME)["name"] == NAME == "iso-bench v3"
    assert current_definition() == definition(NAME)
    from iso_bench.results import benchmark

    monkeypatch.setattr(benchmark, "DEFAULT_METHODS", DEFAULT_METHODS[:-1])
    assert "mean-proj" not in current_definition()["methods"] and definition_sha256() == V3_SHA256
    monkeypatch.setattr(benchmark, "STORAGE_METHODS", STORAGE_METHODS[:-1])
    assert "pca-64-precision=binary" not in current_definition()["methods"]


def test_v3_adds_the_bytes_axis_with_resolved_parameters_and_the_model_s_own_pooling() -> None:
    """30 storage specs: int8 and binary of raw, center, zscore, whiten, whiten-256 and zipfian-whiten (12), and
    truncate-k and pca-k at 256, 128 and 64 dimensions, each alone, in int8 and in binary (18)."""
    methods = definition()["methods"]
    assert len(STORAGE_METHODS) == len(set(STORAGE_METHODS)) == 30 and len(methods) == 43
    assert set(methods) == set(DEFAULT_METHODS) | set(STORAGE_METHODS)
    assert methods["zipfian-whiten-precision=int8"] == {
        "method": "zipfian-whiten", "level": "token",
        "params": {"weights": "zipf", "n_components": None, "eps": 0.0, "precision": "int8"}}
    assert methods["pca-64-precision=binary"] == {"method": "pca", "level": "sentence",
                                                   "params": {"n_components": 64, "precision": "binary"}}
    assert methods["truncate-128"] == {"method": "truncate", "level": "sentence", "params": {"truncate_dim": 128}}
    assert sum(spec.endswith("-precision=int8") for spec in methods) == 12  # 6 methods and 6 cuts
    assert "model's own pooling" in definition()["token_level"] and "Hamming" in definition()["storage"]["binary"]
    assert result_record("pca-128-precision=int8", "held-out", 1000)["conforms"]
    assert result_record("pca-96", "task", 1000)["differs"] == ["method parameters"]  # not a v3 cut


def test_a_result_conforms_only_with_the_benchmarks_method_fit_corpus_and_resamples() -> None:
    assert result_record("softdecay", "task", 1000)["conforms"]
    assert result_record("raw", None, 1000)["conforms"]
    assert result_record("whiten-eps=0.1", "task", 1000)["differs"] == ["method parameters"]
    assert result_record("whiten-level=token", "task", 1000)["differs"] == ["method parameters"]
    assert result_record("whiten", "train", 200)["differs"] == ["fit corpus", "resamples"]
    assert result_record("whiten", "held-out", 1000)["conforms"]  # the second setting (since v2)


def test_results_record_the_benchmark_and_the_leaderboard_counts_them(keyword_variant) -> None:
    from iso_bench.report.board import benchmark_counts

    record = keyword_variant(["cat", "dog"], "center").provenance("STS12")["benchmark"]
    assert record == {"name": NAME, "definition_sha256": definition_sha256(), "conforms": True, "differs": []}
    results = [types.SimpleNamespace(record={"benchmark": record}), types.SimpleNamespace(record={}),
               types.SimpleNamespace(record={"benchmark": {**record, "definition_sha256": "0" * 64}})]
    assert benchmark_counts(results) == ((f"{NAME}, definition 000000000000", 1),
                                         (f"{NAME}, definition {definition_sha256()[:12]}", 1), ("none recorded", 1))


def test_a_board_mixing_benchmark_definitions_labels_those_rows_and_never_ranks_them(tmp_path) -> None:
    """raw and whiten record this definition; center, the best on every task, records another (as a run under
    other method defaults would) and abtt none: their rows say so, are never bold and never the model's best;
    a board of one definition only is labelled and ranked as before."""
    from iso_bench.report import render
    from iso_bench.report.board import build_leaderboard
    from iso_bench.report.results import read_results
    from tests.report_helpers import set_record, small_case, write_result

    root = small_case(tmp_path)
    ours = result_record("whiten", "task", 1000)
    for path in (root / "results").rglob("*.json"):
        if "abtt" not in str(path) and path.name != "model_meta.json":
            set_record(path, benchmark=ours)
    theirs = {**ours, "definition_sha256": "ab" * 32}
    for task, main in (("STS12", 0.90), ("STSBenchmark", 0.95)):
        set_record(write_result(root, "org/alpha", "center", task, main), benchmark=theirs)
    board = build_leaderboard(read_results(root), ci=False)
    sts = board.sections[0].tables[0]
    rows = {row.label: row for row in sts.rows}
    other, unrecorded = f"center [benchmark={NAME} @{'ab' * 6}]", "abtt [benchmark=none recorded]"
    assert set(rows) == {"raw", "whiten", other, unrecorded}
    assert [c.value for c in rows[other].cells] == [90.0, 95.0, 92.5]  # shown, with its numbers
    assert not any(c.best for c in rows[other].cells)  # but never bold: raw is the best of the ranked rows
    assert [c.best for c in rows["raw"].cells] == [True, True, True]
    assert not rows[unrecorded].cells[0].best  # abtt ties raw on STS12 (72.37) but is not of this definition
    assert any("never bold and never best" in note and other in note for note in sts.notes)
    page = render(board, "html")
    assert other in page and f"{NAME} @{definition_sha256()[:12]}" in page
    [comparison] = board.sections[-1].tables
    assert [(row.label, row.tag) for row in comparison.rows] == [("raw", "best")]  # center is not the best
    for path in (root / "results").rglob("*.json"):  # every result of one definition: nothing to label
        if path.name != "model_meta.json":
            set_record(path, benchmark=ours)
    labels = [row.label for row in build_leaderboard(read_results(root), ci=False).sections[0].tables[0].rows]
    assert labels == ["raw", "abtt", "center", "whiten"]
