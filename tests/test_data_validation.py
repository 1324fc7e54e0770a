"""Bad data stops a run before anything is loaded: a DataFormatError whose message starts with file:line.

Mirror copies are built in tmp_path from a few lines of the shared hub mirror (laid out as
``<tmp>/mteb/sts12-sts/test.jsonl``); the readers of iso-bench's own datasets get small broken copies
of their release files.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from iso_bench.data.mirror_check import STS_ROWS, DataFormatError, RowSpec, check_mirror, check_parquet, row_spec
from iso_bench.data.sources import DataNotFoundError, use_source

from .conftest import SHARED_DATA, _missing

STS12 = Path("mteb") / "sts12-sts"


@pytest.fixture(scope="module")
def sts_rows() -> list[dict]:
    """The first 6 rows of the shared STS12 mirror copy."""
    source = SHARED_DATA / "hub" / STS12 / "test.jsonl"
    if not source.is_file():
        _missing(f"the dataset mirror {source}")
    with source.open(encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(6)]


@pytest.fixture
def datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep what the datasets library caches while loading inside tmp_path."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")


def write_mirror(root: Path, lines: list[str]) -> Path:
    """``<root>/mteb/sts12-sts/test.jsonl`` holding ``lines``; returns the file's resolved path."""
    path = root / STS12 / "test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path.resolve()


def mirror_with(root: Path, rows: list[dict], line: int, change: dict | None = None, drop: str = "") -> Path:
    """A mirror of ``rows`` in which row ``line`` (1-based) gets ``change`` and loses the field ``drop``."""
    rows = [dict(r) for r in rows]
    rows[line - 1].update(change or {})
    rows[line - 1].pop(drop, None)
    return write_mirror(root, [json.dumps(r) for r in rows])


def failure(folder: Path, spec=STS_ROWS) -> str:
    with pytest.raises(DataFormatError) as err:
        check_mirror(folder, spec)
    return str(err.value)


# ------------------------------------------------------------------------------------------ mirror files


def test_a_bad_json_line_is_named_by_file_and_1_based_line(tmp_path: Path, sts_rows: list[dict]) -> None:
    lines = [json.dumps(r) for r in sts_rows]
    lines[2] = lines[2][:-2]  # the third line loses its closing '"}' characters
    path = write_mirror(tmp_path, lines)
    message = failure(path.parent)
    assert message.startswith(f"{path}:3: not valid JSON (")


def test_a_row_missing_its_score_names_file_line_and_field(tmp_path: Path, sts_rows: list[dict]) -> None:
    path = mirror_with(tmp_path, sts_rows, 4, drop="score")
    assert failure(path.parent).startswith(f"{path}:4: field 'score' is missing (an STS task reads")


def test_a_null_score_is_an_error(tmp_path: Path, sts_rows: list[dict]) -> None:
    path = mirror_with(tmp_path, sts_rows, 2, {"score": None})
    assert failure(path.parent).startswith(f"{path}:2: field 'score' is null")


@pytest.mark.parametrize("score", ["abc", "3.5", True, [4.0]])
def test_a_score_that_is_not_a_number_is_an_error(tmp_path: Path, sts_rows: list[dict], score) -> None:
    path = mirror_with(tmp_path, sts_rows, 5, {"score": score})
    message = failure(path.parent)
    assert message.startswith(f"{path}:5: field 'score' is ") and ", not a number (" in message


def test_nan_is_not_json(tmp_path: Path, sts_rows: list[dict]) -> None:
    lines = [json.dumps(r) for r in sts_rows]
    lines[1] = lines[1].replace('"score": ' + json.dumps(sts_rows[1]["score"]), '"score": NaN')
    path = write_mirror(tmp_path, lines)
    assert failure(path.parent).startswith(f"{path}:2: not valid JSON (NaN is not a JSON value")


def test_a_valid_mirror_passes_and_blank_lines_are_skipped(tmp_path: Path, sts_rows: list[dict]) -> None:
    lines = [json.dumps(r) for r in sts_rows]
    write_mirror(tmp_path, [*lines[:3], "", *lines[3:]])
    assert check_mirror((tmp_path / STS12).resolve(), STS_ROWS) == 1


def test_rows_share_their_fields_when_the_reader_is_unknown(tmp_path: Path) -> None:
    rows = [{"text": f"t{i}", "n": i} for i in range(5)]
    folder = tmp_path / "org" / "ds"
    folder.mkdir(parents=True)
    path = folder / "train.jsonl"
    for change, expected in [
        ({2: {"text": "t2"}}, f"{path}:3: field 'n' is missing (4 of 5 rows fill it"),
        ({1: {"text": "t1", "n": None}}, f"{path}:2: field 'n' is null"),
        ({4: {"text": "t4", "n": "four"}}, f"{path}:5: field 'n' is a string (\"four\"), not a number"),
        ({0: ["t0", 0]}, f"{path}:1: the row is an array, not a JSON object"),
    ]:
        broken = [change.get(i, row) for i, row in enumerate(rows)]
        path.write_text("".join(json.dumps(r) + "\n" for r in broken))
        assert failure(folder, None).startswith(expected)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows).replace(b"t3", b"t\xff3"))
    assert failure(folder, None).startswith(f"{path}:4: not valid UTF-8")
    rows[3]["note"] = "a field few rows have is allowed"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert check_mirror(folder) == 1


def test_json_arrays_gzip_and_metadata_files(tmp_path: Path, sts_rows: list[dict]) -> None:
    folder = tmp_path / "org" / "ds"
    folder.mkdir(parents=True)
    (folder / "dataset_infos.json").write_text(json.dumps({"default": {"features": {}}}, indent=2))
    rows = [dict(r) for r in sts_rows[:3]]
    del rows[2]["score"]
    array = folder / "test.json"
    array.write_text(json.dumps(rows, indent=None).replace("}, {", "},\n  {"))  # one row per line
    assert failure(folder).startswith(f"{array}:3: field 'score' is missing")
    array.unlink()
    packed = folder / "test.jsonl.gz"
    packed.write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in rows)))
    assert failure(folder).startswith(f"{packed}:3: field 'score' is missing")
    packed.write_bytes(gzip.compress(b"\n".join(json.dumps(r).encode() for r in sts_rows[:3]))[:-8])
    assert failure(folder).startswith(f"{packed}: not a readable gzip file")


def test_parquet_files_must_open_and_fill_the_fields(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "org" / "ds"
    folder.mkdir(parents=True)
    path = folder / "test.parquet"
    table = pa.table({"sentence1": ["a", "b", "c"], "sentence2": ["x", "y", "z"], "score": [1.0, None, 2.0]})
    pq.write_table(table, path)
    assert failure(folder).startswith(f"{path}: row 2: field 'score' is null")
    pq.write_table(table.set_column(2, "score", pa.array(["1", "2", "3"])), path)
    assert failure(folder).startswith(f"{path}: column 'score' holds string values, not numbers")
    pq.write_table(table.drop_columns(["sentence2"]), path)
    assert failure(folder).startswith(f"{path}: column 'sentence2' is missing")
    pq.write_table(table.set_column(2, "score", pa.array([1.0, 2.0, 3.0])), path)
    assert check_parquet(path, STS_ROWS) == 3
    path.write_bytes(path.read_bytes()[:-20])  # a truncated download
    assert failure(folder, None).startswith(f"{path}: not a readable parquet file")


def test_a_folder_that_passed_is_not_read_again(tmp_path: Path, sts_rows: list[dict], monkeypatch) -> None:
    from iso_bench.data import mirror_check

    path = write_mirror(tmp_path, [json.dumps(r) for r in sts_rows])
    reads: list[Path] = []
    real = mirror_check.check_json_file
    monkeypatch.setattr(mirror_check, "check_json_file", lambda p, s: reads.append(p) or real(p, s))
    check_mirror(path.parent, STS_ROWS, "sum-1")
    check_mirror(path.parent, STS_ROWS, "sum-1")
    check_mirror(path.parent, STS_ROWS, "sum-2")  # the files changed: read again
    assert reads == [path, path]


# ------------------------------------------------------------------------------------------ mteb tasks


def test_the_fields_of_mteb_tasks() -> None:
    import mteb

    assert row_spec(mteb.get_task("STS12")) == RowSpec("mteb's STS12", STS_ROWS.fields)
    assert dict(row_spec(mteb.get_task("Banking77Classification")).fields) == {
        "text": ("string",), "label": ("number", "string")}
    assert row_spec(mteb.get_task("SciFact")) is None  # corpus, queries and qrels differ


def test_use_source_stops_before_loading_a_broken_mirror(tmp_path: Path, sts_rows: list[dict]) -> None:
    import mteb

    path = mirror_with(tmp_path, sts_rows, 3, drop="score")
    task = mteb.get_task("STS12")
    with pytest.raises(DataFormatError) as err:
        use_source(task, tmp_path)
    assert str(err.value).startswith(f"{path}:3: field 'score' is missing (mteb's STS12 reads 'sentence1', ")
    assert not task.data_loaded and task.dataset is None


def test_use_source_loads_a_valid_mirror(tmp_path: Path, sts_rows: list[dict], datasets_cache: None) -> None:
    import mteb

    path = write_mirror(tmp_path, [json.dumps(r) for r in sts_rows])
    task = mteb.get_task("STS12")
    source = use_source(task, tmp_path)
    assert source["path"] == path.parent.relative_to(tmp_path.resolve()).as_posix() == "mteb/sts12-sts"  # not its path
    assert task.data_loaded
    assert str(tmp_path) not in json.dumps(source)
    assert list(task.dataset["test"]["score"]) == [r["score"] for r in sts_rows]


def test_an_empty_mirror_folder_names_the_folder(tmp_path: Path, datasets_cache: None) -> None:
    import mteb

    folder = tmp_path / STS12
    folder.mkdir(parents=True)
    with pytest.raises(DataNotFoundError) as err:
        use_source(mteb.get_task("STS12"), tmp_path)
    message = str(err.value)
    assert message.startswith(f"{folder.resolve()}: the datasets library finds no data of 'mteb/sts12-sts'")
    assert "doesn't contain any data files" in message


def test_a_load_failure_keeps_the_underlying_reason(tmp_path: Path) -> None:
    import pyarrow as pa
    from datasets.exceptions import DatasetGenerationError

    class Task:
        """Stands for an mteb task whose loading fails inside the datasets library."""

        metadata = type("Meta", (), {"dataset": {"path": "org/ds", "revision": "r1"},
                                     "model_copy": lambda self, update: self})()
        data_loaded = False

        def load_data(self) -> None:
            try:
                raise pa.ArrowInvalid("JSON parse error: Missing a comma in row 2")
            except pa.ArrowInvalid as exc:
                raise DatasetGenerationError("An error occurred while generating the dataset") from exc

    (tmp_path / "org" / "ds").mkdir(parents=True)
    (tmp_path / "org" / "ds" / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFormatError) as err:
        use_source(Task(), tmp_path)
    message = str(err.value)
    assert message.startswith(f"{(tmp_path / 'org' / 'ds').resolve()}: the datasets library cannot load")
    assert "<- caused by ArrowInvalid: JSON parse error: Missing a comma in row 2" in message


# ------------------------------------------------------------------------------- iso-bench's own readers


def shared_lines(relative: str, count: int) -> list[str]:
    """The first ``count`` lines of a shared release file (skipped where the shared data is absent)."""
    source = SHARED_DATA / relative
    if not source.is_file():
        _missing(f"the shared data file {source}")
    with source.open(encoding="utf-8", newline="") as f:
        return [next(f).rstrip("\n") for _ in range(count)]


def put(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def cut(line: str, keep: int) -> str:
    """``line`` with only its first ``keep`` tab-separated fields."""
    return "\t".join(line.split("\t")[:keep])


def test_paper_sts_readers_name_file_line_and_field(tmp_path: Path) -> None:
    from iso_bench.kinds.paper_sts.data import load_sick, load_sts_benchmark, load_sts_subset

    folder = "senteval/downstream/STS/STS12-en-test/"
    pairs, gold = shared_lines(folder + "STS.input.MSRpar.txt", 3), shared_lines(folder + "STS.gs.MSRpar.txt", 3)
    inp, gs = tmp_path / "STS.input.MSRpar.txt", tmp_path / "STS.gs.MSRpar.txt"
    put(inp, [pairs[0], cut(pairs[1], 1), pairs[2]]), put(gs, gold)
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(inp))}:2: .*found 1 fields: sentence 2 is missing$"):
        load_sts_subset(inp, gs)
    put(inp, pairs), put(gs, [gold[0], gold[1], "abc"])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(gs))}:3: gold score 'abc' is not a number"):
        load_sts_subset(inp, gs)

    stsb = shared_lines("senteval/downstream/STS/STSBenchmark/sts-test.csv", 3)
    path = put(tmp_path / "d" / "STS" / "STSBenchmark" / "sts-test.csv", [stsb[0], stsb[1], cut(stsb[2], 6)])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:3: .*found 6: s2 is missing$"):
        load_sts_benchmark(tmp_path / "d")
    fields = stsb[1].split("\t")
    put(path, [stsb[0], "\t".join([*fields[:4], "n/a", *fields[5:]]), stsb[2]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: gold score 'n/a' is not a number"):
        load_sts_benchmark(tmp_path / "d")

    sick = shared_lines("senteval/downstream/SICK/SICK_test_annotated.txt", 3)
    path = put(tmp_path / "d" / "SICK" / "SICK_test_annotated.txt", [sick[0], cut(sick[1], 3), sick[2]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: .*found 3: relatedness_score is missing$"):
        load_sick(tmp_path / "d")


def test_wic_reader_names_file_line_and_field(tmp_path: Path) -> None:
    from iso_bench.kinds.wic import load_wic_split

    data = shared_lines("wic/WiC_dataset/dev/dev.data.txt", 3)
    gold = shared_lines("wic/WiC_dataset/dev/dev.gold.txt", 3)
    data_file, gold_file = tmp_path / "dev.data.txt", tmp_path / "dev.gold.txt"
    put(data_file, [data[0], data[1], cut(data[2], 4)]), put(gold_file, gold)
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(data_file))}:3: .*found 4: sentence 2 is missing$"):
        load_wic_split(data_file, gold_file)
    put(data_file, data), put(gold_file, [gold[0], "yes", gold[2]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(gold_file))}:2: label 'yes' is not T or F"):
        load_wic_split(data_file, gold_file)


@pytest.fixture
def wsd_copy(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """The first sentence of semeval2007 (data XML and gold keys) as a corpus of its own."""
    folder = "wsd/WSD_Evaluation_Framework/Evaluation_Datasets/semeval2007/semeval2007"
    xml = shared_lines(folder + ".data.xml", 60)
    xml = [*xml[: xml.index("</sentence>") + 1], "</text>", "</corpus>"]
    ids = {line.split('id="')[1].split('"')[0] for line in xml if "<instance" in line}
    keys = [line for line in shared_lines(folder + ".gold.key.txt", 30) if line.split(" ")[0] in ids]
    assert len(keys) == len(ids) > 1
    return put(tmp_path / "s.data.xml", xml), put(tmp_path / "s.gold.key.txt", keys), xml


def test_wsd_reader_names_file_line_and_field(wsd_copy: tuple[Path, Path, list[str]]) -> None:
    from iso_bench.kinds.wsd.data import load_corpus

    xml_path, key_path, xml = wsd_copy
    assert len(load_corpus(xml_path, key_path)) > 1  # the copy itself is good
    line = next(n for n, text in enumerate(xml, start=1) if "<instance" in text)
    put(xml_path, [t.replace("</instance>", "</instanc>") if n == line else t for n, t in enumerate(xml, 1)])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(xml_path))}:{line}:[0-9]+: not well-formed XML"):
        load_corpus(xml_path, key_path)
    put(xml_path, [t.replace(' lemma="', ' lema="') if n == line else t for n, t in enumerate(xml, 1)])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(xml_path))}:{line}: .*lacks its lemma attribute"):
        load_corpus(xml_path, key_path)
    put(xml_path, xml)
    keys = key_path.read_text().splitlines()
    put(key_path, [keys[0], keys[1].split(" ")[0], *keys[2:]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(key_path))}:2: instance '.*' has no sense key"):
        load_corpus(xml_path, key_path)
    key_path.write_bytes("\n".join(keys).replace("%", "\udcff%", 1).encode("utf-8", "surrogateescape"))
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(key_path))}:1: not valid UTF-8"):
        load_corpus(xml_path, key_path)
