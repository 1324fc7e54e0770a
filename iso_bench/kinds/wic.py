"""The WiC kind (Pilehvar & Camacho-Collados, NAACL 2019): the official release, its reader, and the
training-free protocol.

Each WiC instance is a target lemma, its part of speech, and two space-tokenized sentences that use the
lemma; the gold label says whether the two uses share a sense. The data file gives the target's token
index in each sentence (``i-j``); the loader turns those into CHARACTER spans ``(start, end)`` (end
exclusive) of the target token inside each sentence string, which is what a span extractor needs.

The protocol without training (the paper's baseline for contextual embeddings): score a pair by the
cosine of its two target-word vectors, choose on train the threshold that maximises train accuracy,
predict "same sense" when ``cosine >= threshold``, and report accuracy on dev and test. Chance is 50 %.

Loading is all-or-nothing: a malformed line (wrong column count, bad index, a token index outside its
sentence, a gold file of a different length, a label other than T/F) raises :class:`WiCFormatError`
naming ``file:line``, so no score is ever computed from a partial read.

Example:
    >>> pairs = load_wic("shared/data/wic/WiC_dataset", "dev")                     # doctest: +SKIP
    >>> p = pairs[0]; p.sentence1[p.span1[0]:p.span1[1]], p.lemma, p.label          # doctest: +SKIP
    ('board', 'board', False)
    >>> t = choose_threshold([0.1, 0.4, 0.9], [False, True, True]); t
    0.25
    >>> accuracy([0.2, 0.3], [False, True], t)
    1.0
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.data.mirror_check import DataFormatError
from iso_bench.files import read_lines
from iso_bench.kinds.base import Kind, WordEncoder, require
from iso_bench.numerics.linalg import paired_cosine
from iso_bench.numerics.stats import Units

POS_TAGS = ("N", "V")
LABELS = {"T": True, "F": False}
SPLITS = ("train", "dev", "test")

# Suppletive forms whose first letter differs from the lemma's; every other inflection of a WiC lemma
# starts with the lemma's first letter (checked on the release). Used only by `unrelated_targets`.
_SUPPLETIVE = {
    "be": {"am", "is", "are", "was", "were", "'m", "'s", "'re"},
    "go": {"went"},
    "have": {"'ve", "'d", "'s"},
}

_INDEX = re.compile(r"(\d+)-(\d+)")


class WiCFormatError(DataFormatError):
    """A WiC data or gold file is malformed; the message starts with ``file:line``."""


@dataclass(frozen=True)
class WiCPair:
    """One WiC instance.

    ``span1``/``span2`` are character offsets ``(start, end)``, end exclusive, of the target token in
    ``sentence1``/``sentence2``; ``indices`` are the token indices the data file gave; ``line`` is the
    1-based line in the data file (and in the gold file).
    """

    lemma: str
    pos: str
    sentence1: str
    sentence2: str
    span1: tuple[int, int]
    span2: tuple[int, int]
    label: bool
    indices: tuple[int, int]
    line: int

    @property
    def target1(self) -> str:
        """The target token as it appears in sentence 1 (for example an inflected form of ``lemma``)."""
        return self.sentence1[self.span1[0] : self.span1[1]]

    @property
    def target2(self) -> str:
        """The target token as it appears in sentence 2."""
        return self.sentence2[self.span2[0] : self.span2[1]]


@dataclass(frozen=True)
class WiCResult:
    """The threshold chosen on ``fit_split`` and the accuracy (a fraction in [0, 1]) on every split."""

    threshold: float
    fit_split: str
    accuracy: dict[str, float]
    sizes: dict[str, int]


def _lines(path: Path) -> list[str]:
    return read_lines(path, WiCFormatError)


def _char_span(sentence: str, index: int, which: int, where: str) -> tuple[int, int]:
    """The character span of token ``index`` of a space-tokenized sentence."""
    tokens = sentence.split(" ")
    if index >= len(tokens):
        raise WiCFormatError(
            f"{where}: token index {index} is outside sentence {which} ({len(tokens)} tokens: {sentence!r})"
        )
    if not tokens[index]:
        raise WiCFormatError(f"{where}: token {index} of sentence {which} is empty (doubled space?): {sentence!r}")
    start = sum(len(t) + 1 for t in tokens[:index])
    return start, start + len(tokens[index])


def _parse_data_line(line: str, where: str) -> tuple[str, str, int, int, str, str]:
    fields = line.split("\t")
    if len(fields) != 5:
        names = ("lemma", "POS", "i-j", "sentence 1", "sentence 2")
        missing = f": {names[len(fields)]} is missing" if len(fields) < len(names) else ""
        raise WiCFormatError(
            f"{where}: expected 5 tab-separated fields ({', '.join(names)}), found {len(fields)}{missing}"
        )
    lemma, pos, index, s1, s2 = fields
    if not lemma.strip():
        raise WiCFormatError(f"{where}: empty target lemma")
    if pos not in POS_TAGS:
        raise WiCFormatError(f"{where}: part of speech {pos!r} is not one of {', '.join(POS_TAGS)}")
    m = _INDEX.fullmatch(index)
    if m is None:
        raise WiCFormatError(f"{where}: token indices {index!r} are not of the form i-j (two non-negative integers)")
    return lemma, pos, int(m.group(1)), int(m.group(2)), s1, s2


def load_wic_split(data_file: str | Path, gold_file: str | Path) -> list[WiCPair]:
    """Read one WiC split: the data file and its gold file, line by line in step.

    Raises :class:`WiCFormatError` (message ``file:line: ...``) on the first malformed line; a gold file
    longer or shorter than the data file is an error at the first line that has no partner (after the
    lines both files have were checked, so a stray blank label is reported where it is).

    Example:
        >>> pairs = load_wic_split("dev/dev.data.txt", "dev/dev.gold.txt")   # doctest: +SKIP
        >>> len(pairs)                                                      # doctest: +SKIP
        638
    """
    data_file, gold_file = Path(data_file), Path(gold_file)
    data, gold = _lines(data_file), _lines(gold_file)
    pairs = []
    for n, (line, label) in enumerate(zip(data, gold), start=1):  # noqa: B905 (lengths checked below)
        where = f"{data_file}:{n}"
        lemma, pos, i, j, s1, s2 = _parse_data_line(line, where)
        if label.strip() not in LABELS:
            raise WiCFormatError(f"{gold_file}:{n}: label {label!r} is not T or F")
        pairs.append(
            WiCPair(
                lemma=lemma,
                pos=pos,
                sentence1=s1,
                sentence2=s2,
                span1=_char_span(s1, i, 1, where),
                span2=_char_span(s2, j, 2, where),
                label=LABELS[label.strip()],
                indices=(i, j),
                line=n,
            )
        )
    if len(gold) != len(data):
        n = len(pairs) + 1
        if len(gold) < len(data):
            raise WiCFormatError(
                f"{gold_file}:{n}: missing label for {data_file.name} line {n} "
                f"(gold file has {len(gold)} lines, data file {len(data)})"
            )
        raise WiCFormatError(
            f"{gold_file}:{n}: label with no data line (gold file has {len(gold)} lines, data file {len(data)})"
        )
    return pairs


def load_wic(root: str | Path, split: str) -> list[WiCPair]:
    """Read ``<root>/<split>/<split>.data.txt`` with its ``.gold.txt`` (the official release layout).

    Example:
        >>> len(load_wic("shared/data/wic/WiC_dataset", "train"))   # doctest: +SKIP
        5428
    """
    if split not in SPLITS:
        raise ValueError(f"unknown WiC split {split!r}; expected one of {', '.join(SPLITS)}")
    folder = Path(root) / split
    return load_wic_split(folder / f"{split}.data.txt", folder / f"{split}.gold.txt")


def labels_of(pairs: Sequence[WiCPair]) -> np.ndarray:
    """The gold labels as a boolean array aligned with ``pairs``."""
    return np.fromiter((p.label for p in pairs), dtype=bool, count=len(pairs))


def unrelated_targets(pairs: Sequence[WiCPair]) -> list[tuple[int, int, str]]:
    """``(line, sentence 1 or 2, token)`` for every target token that does not look like a form of its lemma.

    A token "looks like" its lemma when it starts with the lemma's first letter (case-insensitive), or is
    one of the few suppletive forms of *be*, *go* and *have*. This is a diagnostic for misplaced indices,
    not a rule: inflected forms legitimately differ from the lemma, so the loader does not enforce it.
    """
    found = []
    for p in pairs:
        lemma = p.lemma.lower()
        for which, token in ((1, p.target1), (2, p.target2)):
            t = token.lower()
            if t[:1] != lemma[:1] and t not in _SUPPLETIVE.get(lemma, ()):
                found.append((p.line, which, token))
    return found


def _check(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1 or y.shape != s.shape:
        raise ValueError(f"scores and labels must be 1-D and of the same length, got {s.shape} and {y.shape}")
    if s.size == 0:
        raise ValueError("no scores given")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"scores contain {int(np.sum(~np.isfinite(s)))} non-finite values")
    if y.dtype != bool:
        if not np.all((y == 0) | (y == 1)):
            raise ValueError("labels must be booleans (or 0/1)")
        y = y.astype(bool)
    return s, y


def choose_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray) -> float:
    """The threshold that maximises accuracy of ``score >= threshold`` on these scores and labels.

    Candidates, in increasing order, one per distinct way to split the sorted distinct scores
    ``u_1 < ... < u_m``: ``u_1`` (everything predicted True), the midpoint of each consecutive pair
    ``(u_k + u_{k+1}) / 2``, and the smallest float above ``u_m`` (everything predicted False; finite, so
    it serialises to JSON). Ties in accuracy go to the SMALLEST candidate, which makes the choice
    deterministic and independent of the input order.

    Example:
        >>> choose_threshold([0.2, 0.8, 0.5, 0.5], [False, True, True, False])
        0.35
    """
    s, y = _check(scores, labels)
    values, inverse = np.unique(s, return_inverse=True)
    n_true = np.bincount(inverse, weights=y, minlength=values.size)
    n_false = np.bincount(inverse, weights=~y, minlength=values.size)
    # candidate k (0..m) predicts True for the values u_{k+1}..u_m: correct = false below + true at/above
    false_below = np.concatenate(([0.0], np.cumsum(n_false)))
    true_below = np.concatenate(([0.0], np.cumsum(n_true)))
    correct = false_below + (true_below[-1] - true_below)
    k = int(np.argmax(correct))  # the first maximum: the smallest threshold
    if k == 0:
        return float(values[0])
    if k == values.size:
        return float(np.nextafter(values[-1], np.inf))
    lo, hi = values[k - 1], values[k]
    mid = lo + (hi - lo) / 2
    return float(mid if lo < mid <= hi else hi)  # adjacent floats: the midpoint rounds onto an end


def accuracy(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray, threshold: float) -> float:
    """The fraction of pairs (in [0, 1]) where ``score >= threshold`` equals the label.

    Example:
        >>> accuracy([0.1, 0.5, 0.9], [False, False, True], 0.5)
        0.6666666666666666
    """
    s, y = _check(scores, labels)
    return float(np.mean((s >= threshold) == y))


def evaluate_wic(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    labels: Mapping[str, Sequence[bool] | np.ndarray],
    fit_split: str = "train",
) -> WiCResult:
    """Choose the threshold on ``fit_split`` and report the accuracy of every split with that threshold.

    ``scores[split]`` are the cosines of the target vectors of that split's pairs (see
    :func:`cosine_pairs`), ``labels[split]`` their gold labels (see :func:`labels_of`).

    Example:
        >>> r = evaluate_wic({"train": [0.1, 0.9], "test": [0.2, 0.3]},
        ...                  {"train": [False, True], "test": [False, True]})
        >>> r.threshold, r.accuracy["test"]
        (0.5, 0.5)
    """
    if set(scores) != set(labels):
        raise ValueError(f"scores and labels cover different splits: {sorted(scores)} vs {sorted(labels)}")
    if fit_split not in scores:
        raise ValueError(f"the fit split {fit_split!r} is not among the scored splits {sorted(scores)}")
    threshold = choose_threshold(scores[fit_split], labels[fit_split])
    acc = {name: accuracy(scores[name], labels[name], threshold) for name in scores}
    sizes = {name: len(np.asarray(scores[name])) for name in scores}
    return WiCResult(threshold=threshold, fit_split=fit_split, accuracy=acc, sizes=sizes)


class WiCKind(Kind):
    """WiC accuracy with a cosine threshold chosen on ``params["threshold_split"]``. Main score: test accuracy.
    Units: each test pair's correctness under that threshold (fixed: a resample redraws test pairs only)."""

    needs_tokens = True

    def read(self, folder: Path) -> dict[str, list[WiCPair]]:
        return {split: load_wic(folder, split) for split in SPLITS}

    def fit_texts(self) -> list[str]:
        self.load_data()
        return [s for split in self.card.params["scored_splits"] for p in self.dataset[split]
                for s in (p.sentence1, p.sentence2)]

    def train_texts(self) -> list[str]:
        """The training split's sentences (what the held-out setting fits on); the threshold split is train."""
        self.load_data()
        return [s for p in self.dataset["train"] for s in (p.sentence1, p.sentence2)]

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        name = self.metadata.name
        variant = require(model, WordEncoder, name)
        cosines, labels = {}, {}
        where = {"task_metadata": self.metadata}  # the prompt of the task, as the runner encoded its texts
        for part, pairs in self.dataset.items():
            a = variant.word_vectors([p.sentence1 for p in pairs], [p.span1 for p in pairs], name, **where)
            b = variant.word_vectors([p.sentence2 for p in pairs], [p.span2 for p in pairs], name, **where)
            cosines[part], labels[part] = paired_cosine(a, b), labels_of(pairs)
        result = evaluate_wic(cosines, labels, fit_split=self.card.params["threshold_split"])
        correct = (np.asarray(cosines["test"], np.float64) >= result.threshold) == labels["test"]
        self.last_units = (Units(correct, "mean") if self.metadata.main_score == "accuracy" else
                           f"main score {self.metadata.main_score}: only test accuracy has per-pair units here")
        return {"accuracy": result.accuracy["test"], "accuracy_dev": result.accuracy["dev"],
                "accuracy_train": result.accuracy["train"], "threshold": result.threshold,
                "threshold_split": result.fit_split, **{f"n_{k}": v for k, v in result.sizes.items()}}


KIND = WiCKind
