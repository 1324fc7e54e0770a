"""Checks of a hub mirror's data files, run before the datasets library reads them.

The datasets library reports one bad JSON line as "An error occurred while generating the dataset"
(the line only in its log, counted from 0), and loads a row without a ``score`` as a null that fails
much later, at scoring time. :func:`check_mirror` reads every data file of a mirror folder first and
raises :class:`~iso_bench.data.mirror_check.DataFormatError` whose message starts with ``file:line`` (1-based) and
names the field, so bad data stops a run before anything is loaded or encoded.

The rules, for JSON-lines and JSON files (``.jsonl``, ``.json``, also gzip-compressed):

* every non-blank line is one JSON object (a ``.json`` file may instead hold one array of objects;
  a ``.json`` file holding a single object is a metadata document and is not read);
* every row has the fields the file's rows share: a field that more than half of the rows fill must
  be present and not null in every row, with the same JSON type (a number where the others have a
  number, ...); ``NaN`` and ``Infinity`` are not JSON and are rejected;
* the fields the task reads (:func:`row_spec`: for an mteb STS task its two sentence columns as
  strings and ``score`` as a number; for a classification task its text as a string and its label
  as a number or string) must be in every row, filled, of that type.

Parquet files must open (their footer is read with pyarrow); the task's fields must be columns of
the right type without nulls. Other files (``README.md``, CSV, ...) are left to the datasets library.
A folder that passed is remembered by its checksum for the rest of the process.

Example:
    >>> check_mirror(Path("shared/data/hub/mteb/sts12-sts"), STS_ROWS)   # doctest: +SKIP
    1
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iso_bench.files import folder_checksum
from iso_bench.registry import IsoBenchError


class DataFormatError(IsoBenchError, ValueError):
    """A data file is malformed; the message starts with ``file:line`` and says what is wrong."""


_KINDS: dict[type, str] = {
    str: "string", int: "number", float: "number", bool: "boolean",
    list: "array", dict: "object", type(None): "null",
}
_ARTICLE = {"string": "a string", "number": "a number", "boolean": "a boolean", "array": "an array",
            "object": "an object", "null": "null"}
JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class RowSpec:
    """The fields a reader takes from every row: ``fields`` pairs a name with its allowed JSON kinds
    (``"string"``, ``"number"``, ...); ``reader`` names the reader in messages."""

    reader: str
    fields: tuple[tuple[str, tuple[str, ...]], ...]

    def names(self) -> str:
        quoted = [repr(name) for name, _ in self.fields]
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


STS_ROWS = RowSpec("an STS task", (("sentence1", ("string",)), ("sentence2", ("string",)), ("score", ("number",))))
"""The rows of mteb's STS datasets (the STS task classes read these three fields)."""


def row_spec(task: Any) -> RowSpec | None:
    """The fields ``task`` reads from every row of its dataset, or None when that is not known.

    Known for mteb's STS and classification tasks that load their dataset as it is (a task that
    overrides ``load_data`` or ``dataset_transform`` may rename columns after loading).
    """
    try:
        from mteb.abstasks import AbsTask, AbsTaskClassification, AbsTaskSTS  # lazily: mteb takes seconds to import
    except ImportError:  # pragma: no cover - mteb is a dependency
        return None
    cls = type(task)
    if not isinstance(task, AbsTask) or cls.load_data is not AbsTask.load_data:
        return None
    if cls.dataset_transform is not AbsTask.dataset_transform:
        return None
    reader = f"mteb's {task.metadata.name}"
    if isinstance(task, AbsTaskSTS) and all(isinstance(c, str) for c in task.column_names):
        first, second = task.column_names
        return RowSpec(reader, ((first, ("string",)), (second, ("string",)), ("score", ("number",))))
    if isinstance(task, AbsTaskClassification) and isinstance(task.input_column_name, str):
        return RowSpec(reader, ((task.input_column_name, ("string",)), (task.label_column_name, ("number", "string"))))
    return None


_PASSED: set[tuple[str, str, RowSpec | None]] = set()


def check_mirror(folder: Path, spec: RowSpec | None = None, checksum: str | None = None) -> int:
    """Check every JSON and parquet file under ``folder`` (hidden folders aside); returns how many.

    Raises :class:`~iso_bench.data.mirror_check.DataFormatError` at the first bad row, ``file:line: ...``. ``checksum``
    is the folder's :func:`~iso_bench.files.folder_checksum` when the caller has it; a folder that
    passed with the same checksum and ``spec`` is not read again.
    """
    folder = Path(folder)
    key = (str(folder), checksum or folder_checksum(folder), spec)
    files = data_files(folder)
    if key in _PASSED:
        return len(files)
    for path in files:
        if path.name.endswith(PARQUET_SUFFIXES):
            check_parquet(path, spec)
        else:
            check_json_file(path, spec)
    _PASSED.add(key)
    return len(files)


def data_files(folder: Path) -> list[Path]:
    """The JSON and parquet files under ``folder``, sorted, outside hidden folders (``.git``, ``.cache``)."""
    return sorted(
        p for p in folder.rglob("*")
        if p.name.endswith(JSON_SUFFIXES + PARQUET_SUFFIXES) and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


# ------------------------------------------------------------------------------------------------ JSON


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value; write a number or null")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON whitespace


def _json_error(path: Path, line: int, exc: ValueError) -> DataFormatError:
    reason = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
    return DataFormatError(f"{path}:{line}: not valid JSON ({reason}); every line must be one JSON object")


def _gzip_error(path: Path, exc: BaseException) -> DataFormatError:
    return DataFormatError(f"{path}: not a readable gzip file ({exc}); replace it with a whole copy")


def read_text(path: Path) -> str:
    """The file's text (gunzipped for ``.gz``); undecodable bytes are a :class:`DataFormatError` with the line."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise _gzip_error(path, exc) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFormatError(f"{path}:{line}: not valid UTF-8 ({exc.reason}); save the file as UTF-8") from None


def stream_lines(path: Path) -> Iterator[bytes]:
    """The lines of a file as bytes, split on ``\\n`` only (gunzipped for ``.gz``), without reading it whole."""
    if path.suffix != ".gz":
        with path.open("rb") as f:
            yield from f
        return
    try:
        with gzip.open(path, "rb") as f:
            yield from f
    except (OSError, EOFError, zlib.error) as exc:
        raise _gzip_error(path, exc) from None


def json_lines(path: Path, lines: Iterable[str | bytes]) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for every non-blank line of a JSON-lines file, lines counted from 1."""
    decode = _DECODER.decode
    for n, line in enumerate(lines, start=1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(f"{path}:{n}: not valid UTF-8 ({exc.reason}); save the file as UTF-8") from None
        if not line or line.isspace():
            continue
        try:
            yield n, decode(line)
        except ValueError as exc:
            raise _json_error(path, n, exc) from None


def json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for every element of a JSON document that is one array (the line it starts on)."""
    try:
        _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc})") from None
    pos = _SPACE.match(text, _SPACE.match(text).end() + 1).end()  # past "[": the first element or "]"
    line, counted = 1, 0
    while text[pos] != "]":  # the text is valid JSON, so elements and commas alternate
        line, counted = line + text.count("\n", counted, pos), pos
        value, end = _DECODER.raw_decode(text, pos)
        yield line, value
        pos = _SPACE.match(text, end).end()
        if text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()


def check_json_file(path: Path, spec: RowSpec | None = None) -> int:
    """Check one JSON-lines or JSON file against the rules of this module; returns its number of rows.

    JSON-lines files are read line by line; a ``.json`` file is read whole, as it may be one document.
    """
    if not path.name.endswith((".json", ".json.gz")):
        return check_rows(path, json_lines(path, stream_lines(path)), spec)
    text = read_text(path)
    head = text.lstrip()[:1]
    if head == "[":
        return check_rows(path, json_array(path, text), spec)
    if head == "{":
        try:
            document = _DECODER.decode(text)
        except ValueError:
            document = None  # not one document: JSON lines
        if isinstance(document, dict):
            return 0  # a metadata document (dataset_infos.json, ...), not rows
    return check_rows(path, json_lines(path, text.split("\n")), spec)


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def _a(kind: str) -> str:
    """``kind`` with its article, as messages say it: "a string", "an array", "null"."""
    return _ARTICLE.get(kind, f"a {kind}")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def check_rows(path: Path, rows: Iterable[tuple[int, Any]], spec: RowSpec | None = None) -> int:
    """Check parsed rows ``(line, value)`` of one file; returns their number.

    One pass counts each distinct shape of row (its field names and value types) with the first line
    that has it; the fields most rows fill, and their usual types, follow from those counts. Every
    row of a shape is equally right or wrong, so the first line of the earliest wrong shape is the
    first bad row of the file.
    """
    first: dict[tuple[tuple[str, ...], tuple[type, ...]], tuple[int, dict[str, Any]]] = {}
    counts: Counter[tuple[tuple[str, ...], tuple[type, ...]]] = Counter()
    for n, row in rows:
        if not isinstance(row, dict):
            raise DataFormatError(
                f"{path}:{n}: the row is {_a(_kind(row))}, not a JSON object; "
                "every row must be one object of named fields"
            )
        shape = (tuple(row), tuple(map(type, row.values())))
        counts[shape] += 1
        if shape not in first:
            first[shape] = (n, row)
    total = sum(counts.values())
    if not total:
        raise DataFormatError(f"{path}:1: the file holds no rows; put the data back or remove the empty file")
    filled: Counter[str] = Counter()
    kinds: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for (names, types), count in counts.items():
        for name, kind in zip(names, types, strict=True):
            if kind is not type(None):
                filled[name] += count
                kinds[name][_KINDS.get(kind, kind.__name__)] += count
    needed = dict(spec.fields) if spec else {}
    for name, count in filled.items():
        if name not in needed and 2 * count > total:
            needed[name] = (kinds[name].most_common(1)[0][0],)
    for n, row in sorted(first.values(), key=lambda item: item[0]):
        problem = _row_problem(row, needed, spec, filled, total)
        if problem:
            raise DataFormatError(f"{path}:{n}: {problem}")
    return total


def _row_problem(row: dict[str, Any], needed: dict[str, tuple[str, ...]], spec: RowSpec | None,
                 filled: Counter[str], total: int) -> str | None:
    """What is wrong with one row, naming the field, or None."""
    for name, allowed in needed.items():
        if spec is not None and name in dict(spec.fields):
            why = f"{spec.reader} reads {spec.names()} from every row; fix this row"
        else:
            why = f"{filled[name]} of {total} rows fill it: every row needs the fields the others have; fix this row"
        if name not in row:
            return f"field {name!r} is missing ({why})"
        value = row[name]
        if value is None:
            return f"field {name!r} is null ({why})"
        if _kind(value) not in allowed:
            expected = " or ".join(_a(k) for k in allowed)
            return f"field {name!r} is {_a(_kind(value))} ({_shown(value)}), not {expected} ({why})"
    return None


# --------------------------------------------------------------------------------------------- parquet


def _arrow_kind(arrow_type: Any) -> str:
    import pyarrow as pa  # lazily: pyarrow is slow to import

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return "string"
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "number"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    return str(arrow_type)


def check_parquet(path: Path, spec: RowSpec | None = None) -> int:
    """Check that a parquet file opens and, with ``spec``, that the fields are typed columns without nulls.

    Returns the number of rows. Rows are counted from 1 in messages (parquet has no lines).
    """
    import pyarrow as pa  # lazily: pyarrow is slow to import
    import pyarrow.compute as pc  # lazily: pyarrow is slow to import
    import pyarrow.parquet as pq  # lazily: pyarrow is slow to import

    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
        wanted = [name for name, _ in spec.fields if name in schema.names] if spec else []
        table = parquet.read(columns=wanted) if wanted else None
    except (pa.ArrowException, OSError) as exc:
        raise DataFormatError(f"{path}: not a readable parquet file ({exc}); replace it with a complete copy") from None
    for name, allowed in spec.fields if spec else ():
        why = f"{spec.reader} reads {spec.names()} from every row"
        if name not in schema.names:
            raise DataFormatError(f"{path}: column {name!r} is missing ({why}; the file has {', '.join(schema.names)})")
        kind = _arrow_kind(schema.field(name).type)
        if kind not in allowed:
            expected = " or ".join(k + "s" for k in allowed)
            found = schema.field(name).type
            raise DataFormatError(f"{path}: column {name!r} holds {found} values, not {expected} ({why})")
        column = table.column(name) if table is not None else None
        if column is not None and column.null_count:
            row = pc.index(column.is_null(), True).as_py() + 1
            raise DataFormatError(f"{path}: row {row}: field {name!r} is null ({why}; fix this row)")
    return parquet.metadata.num_rows
