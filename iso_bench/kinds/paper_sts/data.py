"""The data of the papers' STS protocol: the SentEval copies of STS12-16, STS-B and SICK-R.

Seven English tasks: STS12..STS16 (each a year of SemEval test sets split into subsets by source),
STS-B test (1,379 pairs) and SICK-R test (4,927 pairs, SentEval's split; MTEB's SICK-R uses all 9,927).
Every loader reads a ``downstream`` folder laid out as SentEval's ``data/downstream``
(``STS/STS12-en-test/STS.input.MSRpar.txt`` + ``STS.gs.MSRpar.txt``, ``STS/STSBenchmark/sts-test.csv``,
``SICK/SICK_test_annotated.txt``) and keeps raw, untokenized text.

Loading is all-or-nothing: a malformed line raises :class:`STSFormatError` whose message starts with
``file:line``. A blank gold line (STS15, STS16) means the pair was not scored; the pair is dropped, and
``STSDataset.unscored`` counts how many were.

Example:
    >>> sts12 = load_sts_year("shared/data/senteval/downstream", "STS12")   # doctest: +SKIP
    >>> sts12.sizes["MSRpar"], len(sts12)                                   # doctest: +SKIP
    (750, 3108)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from iso_bench.data.mirror_check import DataFormatError
from iso_bench.files import read_lines

# The subsets of each year that SentEval (and the papers built on it) evaluate. STS13's SMT subset is left
# out: its gold file is distributed but its input is not (LDC licence), so no copy can score it.
STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
GOLD_RANGE = (0.0, 5.0)  # STS gold is 0-5, SICK relatedness 1-5
SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
SICK_COLUMNS = ("sentence_A", "sentence_B", "relatedness_score")
STSB_SPLITS = ("train", "dev", "test")
STSB_COLUMNS = ("genre", "file", "year", "id", "score", "s1", "s2")


class STSFormatError(DataFormatError):
    """An STS, STS-B or SICK file is malformed (or missing); the message starts with ``file:line``."""


@dataclass(frozen=True, eq=False)
class STSSubset:
    """The scored pairs of one subset: ``gold[i]`` is the gold score of ``(sentences1[i], sentences2[i])``,
    read from line ``lines[i]`` of ``source``."""

    name: str
    sentences1: tuple[str, ...]
    sentences2: tuple[str, ...]
    gold: np.ndarray
    lines: tuple[int, ...]
    source: str

    def __len__(self) -> int:
        return len(self.gold)


@dataclass(frozen=True, eq=False)
class STSDataset:
    """One task (``STS12`` .. ``STS16``, ``STSBenchmark``, ``SICK-R``): its subsets in file order."""

    name: str
    subsets: tuple[STSSubset, ...]
    unscored: int = 0

    def __len__(self) -> int:
        return sum(len(s) for s in self.subsets)

    @property
    def sizes(self) -> dict[str, int]:
        """The number of scored pairs per subset (the ``wmean`` weights)."""
        return {s.name: len(s) for s in self.subsets}

    @property
    def gold(self) -> dict[str, np.ndarray]:
        """The gold scores per subset: the first argument of :func:`score_sts`."""
        return {s.name: s.gold for s in self.subsets}

    def sentences(self) -> list[str]:
        """Every distinct sentence, both sides of every scored pair, in first-seen order (a fit corpus)."""
        seen: dict[str, None] = {}
        for s in self.subsets:
            for a, b in zip(s.sentences1, s.sentences2, strict=True):
                seen.setdefault(a)
                seen.setdefault(b)
        return list(seen)


# ---------------------------------------------------------------------------------------------- reading


def _lines(path: Path) -> list[str]:
    return read_lines(path, STSFormatError)


def _score(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise STSFormatError(f"{where}: gold score {text!r} is not a number") from None
    lo, hi = GOLD_RANGE
    if not (math.isfinite(value) and lo <= value <= hi):
        raise STSFormatError(f"{where}: gold score {text!r} is outside [{lo:g}, {hi:g}]")
    return value


def _missing(names: tuple[str, ...] | list[str], found: int) -> str:
    """``": <field> is missing"`` when a line has fewer fields than ``names``, naming the first absent one."""
    return f": {names[found]} is missing" if found < len(names) else ""


def _sentence(text: str, where: str, which: str) -> str:
    if not text.strip():
        raise STSFormatError(f"{where}: {which} is empty")
    return text


def _subset(name: str, rows: list[tuple[int, str, str, float]], source: Path) -> STSSubset:
    return STSSubset(
        name=name,
        sentences1=tuple(r[1] for r in rows),
        sentences2=tuple(r[2] for r in rows),
        gold=np.array([r[3] for r in rows], dtype=np.float64),
        lines=tuple(r[0] for r in rows),
        source=str(source),
    )


def load_sts_subset(input_file: str | Path, gold_file: str | Path, name: str | None = None) -> tuple[STSSubset, int]:
    """One SemEval STS subset: ``STS.input.<name>.txt`` (sentence 1 TAB sentence 2) and ``STS.gs.<name>.txt``
    (one score per line, blank = not scored). Returns the scored pairs and the number of unscored ones.

    Example:
        >>> sub, unscored = load_sts_subset("STS.input.belief.txt", "STS.gs.belief.txt")   # doctest: +SKIP
        >>> len(sub), unscored                                                            # doctest: +SKIP
        (375, 1625)
    """
    input_file, gold_file = Path(input_file), Path(gold_file)
    pairs, gold = _lines(input_file), _lines(gold_file)
    if len(gold) != len(pairs):
        n = min(len(pairs), len(gold)) + 1
        what = "missing score line for input line" if len(gold) < len(pairs) else "score line with no input line"
        raise STSFormatError(
            f"{gold_file}:{n}: {what} {n} (gold file has {len(gold)} lines, {input_file.name} {len(pairs)})"
        )
    rows, unscored = [], 0
    for n, (line, score) in enumerate(zip(pairs, gold, strict=True), start=1):
        where = f"{input_file}:{n}"
        fields = line.split("\t")
        if len(fields) != 2:
            raise STSFormatError(
                f"{where}: expected 2 tab-separated sentences, found {len(fields)} fields"
                + _missing(("sentence 1", "sentence 2"), len(fields))
            )
        s1, s2 = _sentence(fields[0], where, "sentence 1"), _sentence(fields[1], where, "sentence 2")
        if not score.strip():
            unscored += 1
            continue
        rows.append((n, s1, s2, _score(score.strip(), f"{gold_file}:{n}")))
    if not rows:
        raise STSFormatError(f"{gold_file}: no scored pair")
    return _subset(name or input_file.name.removeprefix("STS.input.").removesuffix(".txt"), rows, input_file), unscored


def load_sts_year(downstream: str | Path, year: str) -> STSDataset:
    """STS12..STS16 from ``<downstream>/STS/<year>-en-test/``, with the subsets of :data:`STS_SUBSETS`.

    A missing subset file is an error (a partial copy would silently change the "all" score).

    Example:
        >>> load_sts_year("shared/data/senteval/downstream", "STS16").sizes["postediting"]   # doctest: +SKIP
        244
    """
    if year not in STS_SUBSETS:
        raise ValueError(f"unknown STS year {year!r}; expected one of {', '.join(STS_SUBSETS)}")
    folder = Path(downstream) / "STS" / f"{year}-en-test"
    subsets, unscored = [], 0
    for name in STS_SUBSETS[year]:
        sub, skipped = load_sts_subset(folder / f"STS.input.{name}.txt", folder / f"STS.gs.{name}.txt", name)
        subsets.append(sub)
        unscored += skipped
    return STSDataset(year, tuple(subsets), unscored)


def load_sts_benchmark(downstream: str | Path, split: str = "test") -> STSDataset:
    """STS-B from ``<downstream>/STS/STSBenchmark/sts-<split>.csv`` as one subset named ``split``.

    Lines are tab-separated: genre, file, year, id, score, sentence 1, sentence 2, and in some lines of the
    original release extra columns, which are ignored. Quotes are literal text: no CSV quoting applies.

    Example:
        >>> len(load_sts_benchmark("shared/data/senteval/downstream"))   # doctest: +SKIP
        1379
    """
    if split not in STSB_SPLITS:
        raise ValueError(f"unknown STS-B split {split!r}; expected one of {', '.join(STSB_SPLITS)}")
    path = Path(downstream) / "STS" / "STSBenchmark" / f"sts-{split}.csv"
    rows = []
    for n, line in enumerate(_lines(path), start=1):
        where = f"{path}:{n}"
        fields = line.split("\t")
        if len(fields) < 7:
            raise STSFormatError(
                f"{where}: expected at least 7 tab-separated fields ({', '.join(STSB_COLUMNS)}), "
                f"found {len(fields)}" + _missing(STSB_COLUMNS, len(fields))
            )
        rows.append(
            (
                n,
                _sentence(fields[5], where, "sentence 1"),
                _sentence(fields[6], where, "sentence 2"),
                _score(fields[4].strip(), where),
            )
        )
    if not rows:
        raise STSFormatError(f"{path}: no pair")
    return STSDataset("STSBenchmark", (_subset(split, rows, path),))


def load_sick(downstream: str | Path, split: str = "test") -> STSDataset:
    """SICK-R (relatedness) from ``<downstream>/SICK/SICK_<split>.txt`` as one subset named ``split``.

    The header line names the columns; ``sentence_A``, ``sentence_B`` and ``relatedness_score`` are read
    by name, and every line must have as many fields as the header.

    Example:
        >>> len(load_sick("shared/data/senteval/downstream"))   # doctest: +SKIP
        4927
    """
    if split not in SICK_FILES:
        raise ValueError(f"unknown SICK split {split!r}; expected one of {', '.join(SICK_FILES)}")
    path = Path(downstream) / "SICK" / SICK_FILES[split]
    lines = _lines(path)
    header = lines[0].split("\t") if lines else []
    missing = [c for c in SICK_COLUMNS if c not in header]
    if missing:
        raise STSFormatError(f"{path}:1: header lacks column(s) {', '.join(missing)}: {header}")
    ia, ib, isc = (header.index(c) for c in SICK_COLUMNS)
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        where = f"{path}:{n}"
        fields = line.split("\t")
        if len(fields) != len(header):
            raise STSFormatError(
                f"{where}: expected {len(header)} tab-separated fields, found {len(fields)}"
                + _missing(header, len(fields))
            )
        rows.append(
            (
                n,
                _sentence(fields[ia], where, "sentence_A"),
                _sentence(fields[ib], where, "sentence_B"),
                _score(fields[isc].strip(), where),
            )
        )
    if not rows:
        raise STSFormatError(f"{path}: no pair")
    return STSDataset("SICK-R", (_subset(split, rows, path),))


TASK_LOADERS: dict[str, Callable[[str | Path], STSDataset]] = {
    **{year: partial(load_sts_year, year=year) for year in STS_SUBSETS},
    "STSBenchmark": load_sts_benchmark,
    "SICK-R": load_sick,
}
"""The papers' seven STS tasks (test splits), by MTEB task name."""


def load_sts_task(downstream: str | Path, name: str) -> STSDataset:
    """One of :data:`TASK_LOADERS` by name (``STS12`` .. ``STS16``, ``STSBenchmark``, ``SICK-R``), test split.

    Example:
        >>> {n: len(load_sts_task("shared/data/senteval/downstream", n)) for n in TASK_LOADERS}   # doctest: +SKIP
        {'STS12': 3108, 'STS13': 1500, 'STS14': 3750, 'STS15': 3000, 'STS16': 1186, 'STSBenchmark': 1379, ...}
    """
    if name not in TASK_LOADERS:
        raise ValueError(f"unknown STS task {name!r}; expected one of {', '.join(TASK_LOADERS)}")
    return TASK_LOADERS[name](downstream)
