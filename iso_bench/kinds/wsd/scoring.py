"""Word sense disambiguation by 1-nearest-neighbour on SemCor sense centroids, scored as the framework scores.

The protocol (Wiedemann et al. 2019; Loureiro & Jorge 2019, LMMS without extensions) needs no training:
each sense key's centroid is the mean of the vectors of its SemCor instances; a test instance takes the
WordNet sense of its lemma+POS whose centroid is most cosine-similar to its vector, and WordNet's first
sense when none of its senses has a centroid. Without vectors the same code predicts the first sense
everywhere, the framework's "WN 1st sense" baseline (65.2 F1 on ALL). :func:`score` counts exactly as
the framework's ``Scorer.java``. Vectors arrive as numpy arrays; no encoder is imported here.

Example:
    >>> from iso_bench.kinds.wsd.data import WordNetSenses, framework_paths, load_corpus       # doctest: +SKIP
    >>> wn = WordNetSenses.from_index("nltk_data/corpora/wordnet")                       # doctest: +SKIP
    >>> test = load_corpus(*framework_paths(root, "ALL"), wordnet=wn)                    # doctest: +SKIP
    >>> evaluate(test, wn).scores["ALL"].f1                     # first-sense baseline  # doctest: +SKIP
    65.19...
    >>> train = load_corpus(*framework_paths(root, "semcor"), wordnet=wn)                # doctest: +SKIP
    >>> centroids = SenseCentroids.fit(train_vectors, train.gold_keys())                 # doctest: +SKIP
    >>> evaluate(test, wn, test_vectors, centroids).scores["senseval2"]                  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iso_bench.kinds.wsd.data import Instance, WordNetSenses, WSDCorpus

_PAIR_BLOCK = 1 << 15  # (instance, candidate) pairs per block when computing cosines
_ROW_BLOCK = 1 << 14  # training rows per block when summing centroids


def dataset_of(instance_id: str) -> str:
    """The dataset an ALL instance comes from: its id's prefix (``senseval2.d000.s000.t000`` -> ``senseval2``)."""
    return instance_id.split(".", 1)[0]


@dataclass(frozen=True)
class Score:
    """Precision, recall and F1 in percent, with the counts they come from (``correct`` may be fractional)."""

    precision: float
    recall: float
    f1: float
    correct: float
    answered: int
    total: int

    def to_dict(self) -> dict[str, float]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "correct": self.correct, "answered": self.answered, "total": self.total}


def score(gold: Mapping[str, Collection[str]], predictions: Mapping[str, str | Collection[str] | None]) -> Score:
    """Score predictions against gold keys as the framework's ``Scorer.java`` does.

    An answered instance earns the share of its answers found among its gold keys (1 for a single right
    key); P = correct / answered, R = correct / gold instances, F1 = 2PR / (P + R). Answers for ids not in
    ``gold`` are ignored, like the Java scorer does; ``None`` or an empty answer is no answer. P (and F1)
    are NaN when nothing is answered, as in ``Scorer.java``.

    Example:
        >>> s = score({"a": ["k1"], "b": ["k2", "k3"], "c": ["k4"]}, {"a": "k1", "b": "k3", "c": None})
        >>> round(s.precision, 1), round(s.recall, 1), round(s.f1, 1)
        (100.0, 66.7, 80.0)
    """
    correct = 0.0
    answered = 0
    for iid, answer in predictions.items():
        keys = gold.get(iid)
        if keys is None or not answer:
            continue
        answers = {answer} if isinstance(answer, str) else set(answer)
        correct += sum(a in keys for a in answers) / len(answers)
        answered += 1
    p = correct / answered if answered else math.nan
    r = correct / len(gold) if gold else math.nan
    f1 = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return Score(100 * p, 100 * r, 100 * f1, correct, answered, len(gold))


def instance_outcomes(gold: Mapping[str, Collection[str]], predictions: Mapping[str, str | Collection[str] | None]
                      ) -> np.ndarray:
    """Per gold instance, in ``gold``'s order: ``[correct, answered]``, the share of its answers among its gold
    keys (0 when unanswered) and 1 when it has an answer, exactly what :func:`score` sums (C and A); so
    ``F1 = 2C / (N + A)``, which is the mean correctness when every instance is answered.

    Example:
        >>> instance_outcomes({"a": ["k1"], "b": ["k2", "k3"], "c": ["k4"]}, {"a": "k1", "b": "k1", "c": None})
        array([[1., 1.],
               [0., 1.],
               [0., 0.]])
    """
    out = np.zeros((len(gold), 2))
    for row, (iid, keys) in enumerate(gold.items()):
        answer = predictions.get(iid)
        if answer:
            answers = {answer} if isinstance(answer, str) else set(answer)
            out[row] = sum(a in keys for a in answers) / len(answers), 1.0
    return out


def score_by_dataset(gold: Mapping[str, Collection[str]], predictions: Mapping[str, str | Collection[str] | None],
                     group: Callable[[str], str] = dataset_of, overall: str = "ALL") -> dict[str, Score]:
    """:func:`score` per dataset (``group`` of each gold id), in order of first appearance, then on everything.

    Example:
        >>> sc = score_by_dataset({"x.1": ["k"], "y.1": ["k"]}, {"x.1": "k", "y.1": "j"})
        >>> {name: s.f1 for name, s in sc.items()}
        {'x': 100.0, 'y': 0.0, 'ALL': 50.0}
    """
    parts: dict[str, dict[str, Collection[str]]] = {}
    for iid, keys in gold.items():
        parts.setdefault(group(iid), {})[iid] = keys
    scores = {name: score(part, {i: predictions[i] for i in part if i in predictions}) for name, part in parts.items()}
    scores[overall] = score(gold, predictions)
    return scores


@dataclass(frozen=True)
class SenseCentroids:
    """The mean training vector of each sense key, with how many training instances it averages.

    Example:
        >>> c = SenseCentroids.fit(np.array([[1.0, 0.0], [3.0, 2.0]]), [["a%1:00:00::"], ["a%1:00:00::"]])
        >>> c.keys, c.vectors.tolist(), c.counts.tolist()
        (('a%1:00:00::',), [[2.0, 1.0]], [2])
    """

    keys: tuple[str, ...]
    vectors: np.ndarray  # (n_senses, dim), float64
    counts: np.ndarray  # (n_senses,), int
    index: dict[str, int] = field(repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.index:
            object.__setattr__(self, "index", {key: i for i, key in enumerate(self.keys)})

    @classmethod
    def fit(cls, vectors: np.ndarray, keys: Sequence[Collection[str]]) -> SenseCentroids:
        """Centroids from one vector per training instance and that instance's gold keys.

        An instance with several gold keys contributes its vector to each of them.
        """
        from scipy import sparse  # lazily: scipy is slow to import

        vectors = _check_vectors(vectors, len(keys), "training")
        index: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for row, instance_keys in enumerate(keys):
            if not instance_keys:
                raise ValueError(f"training instance {row} has no gold key")
            for key in dict.fromkeys(instance_keys):
                cols.append(index.setdefault(key, len(index)))
                rows.append(row)
        members = sparse.csc_matrix((np.ones(len(rows)), (cols, rows)), shape=(len(index), len(keys)))
        counts = np.asarray(members.sum(axis=1)).ravel().astype(np.int64)
        sums = np.zeros((len(index), vectors.shape[1]))
        for lo in range(0, len(keys), _ROW_BLOCK):  # in float64, without a float64 copy of all vectors
            block = np.asarray(vectors[lo:lo + _ROW_BLOCK], dtype=np.float64)
            sums += members[:, lo:lo + _ROW_BLOCK] @ block
        return cls(tuple(index), sums / counts[:, None], counts, index)


@dataclass(frozen=True)
class WSDPredictions:
    """One predicted sense key per answered instance, and how many answers fell back to the first sense."""

    keys: dict[str, str]
    fallbacks: int  # instances none of whose WordNet senses has a centroid (all of them without vectors)
    unanswered: int  # instances whose lemma+POS WordNet does not have


def predict(instances: Sequence[Instance], wordnet: WordNetSenses, vectors: np.ndarray | None = None,
            centroids: SenseCentroids | None = None) -> WSDPredictions:
    """1-nearest-neighbour sense of each instance among its WordNet candidates, by cosine to the centroids.

    ``vectors`` has one row per instance. A candidate without a centroid is never chosen; an instance
    with no centroid among its candidates gets WordNet's first sense (a fallback). Ties go to the lower
    sense number. With ``vectors=None`` every instance gets its first sense: the "WN 1st sense" baseline.

    Example:
        >>> wn = WordNetSenses({("bank", "NOUN"): ("bank%1:17:01::", "bank%1:14:00::")})
        >>> inst = [Instance("t0", "s0", "bank", "NOUN", 0, 4)]
        >>> c = SenseCentroids.fit(np.eye(2), [["bank%1:17:01::"], ["bank%1:14:00::"]])
        >>> predict(inst, wn, np.array([[0.1, 0.9]]), c).keys, predict(inst, wn).fallbacks
        ({'t0': 'bank%1:14:00::'}, 1)
    """
    candidates = [wordnet.candidates(inst.lemma, inst.pos) for inst in instances]
    keys = {inst.id: cands[0] for inst, cands in zip(instances, candidates, strict=True) if cands}
    unanswered = len(instances) - len(keys)
    if vectors is None:
        return WSDPredictions(keys, len(keys), unanswered)
    if centroids is None:
        raise ValueError("vectors were given without centroids; fit SenseCentroids on the training set first")
    vectors = _check_vectors(vectors, len(instances), "test")
    if vectors.shape[1] != centroids.vectors.shape[1]:
        raise ValueError(f"test vectors have dimension {vectors.shape[1]}, centroids {centroids.vectors.shape[1]}")

    pair_row: list[int] = []  # (instance row, centroid row) for every candidate that has a centroid
    pair_sense: list[int] = []
    for row, cands in enumerate(candidates):
        for key in cands:
            sense = centroids.index.get(key)
            if sense is not None:
                pair_row.append(row)
                pair_sense.append(sense)
    rows, senses = np.asarray(pair_row, dtype=np.int64), np.asarray(pair_sense, dtype=np.int64)
    x = _unit_rows(vectors)
    c = _unit_rows(centroids.vectors)
    sims = np.empty(len(rows))
    for lo in range(0, len(rows), _PAIR_BLOCK):
        hi = lo + _PAIR_BLOCK
        sims[lo:hi] = np.einsum("ij,ij->i", x[rows[lo:hi]], c[senses[lo:hi]])
    # Pairs are grouped by instance and, within one, ordered by sense number: a stable sort on (row, -sim)
    # puts each instance's best candidate first, the lowest-numbered one among ties.
    order = np.lexsort((-sims, rows))
    firsts = order[np.flatnonzero(np.r_[True, rows[order][1:] != rows[order][:-1]])] if len(rows) else order
    for pair in firsts:
        keys[instances[rows[pair]].id] = centroids.keys[senses[pair]]
    fallbacks = len(keys) - len(firsts)
    return WSDPredictions(keys, fallbacks, unanswered)


@dataclass(frozen=True)
class WSDEvaluation:
    """Scores per dataset and on ``ALL``, with the predictions and fallback counts behind them."""

    scores: dict[str, Score]
    predictions: WSDPredictions

    def to_dict(self) -> dict[str, Any]:
        return {"scores": {name: s.to_dict() for name, s in self.scores.items()},
                "fallbacks": self.predictions.fallbacks, "unanswered": self.predictions.unanswered,
                "instances": next(reversed(self.scores.values())).total}


def evaluate(test: WSDCorpus, wordnet: WordNetSenses, vectors: np.ndarray | None = None,
             centroids: SenseCentroids | None = None) -> WSDEvaluation:
    """Predict every instance of ``test`` (see :func:`predict`) and score it per dataset and overall."""
    predictions = predict(test.instances, wordnet, vectors, centroids)
    return WSDEvaluation(score_by_dataset(test.gold, predictions.keys), predictions)


def _check_vectors(vectors: np.ndarray, rows: int, what: str) -> np.ndarray:
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != rows:
        raise ValueError(f"{what} vectors have shape {vectors.shape}; expected ({rows}, dim), one row per instance")
    if not np.isfinite(vectors).all():
        raise ValueError(f"{what} vectors contain NaN or infinite values")
    return vectors


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero, so its cosine with anything is 0)."""
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norms, out=np.zeros(a.shape, dtype=np.float64), where=norms > 0)
