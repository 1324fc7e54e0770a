"""The isotropy kind: a diagnostic, not a benchmark. On a fixed corpus it reports how isotropic each
variant's vectors are (sentence vectors, and the token vectors of the same sentences), so that the
tables can set isotropy beside task scores. It never enters a ranked average.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.data.fit_corpus import task_texts
from iso_bench.data.sources import use_source
from iso_bench.kinds.base import Kind, TokenEncoder, sentence_vectors
from iso_bench.numerics.isotropy import ISOSCORE_STAR_ZETA, MEASURES, isoscore_star


class IsotropyKind(Kind):
    """Isotropy measures of a model's vectors on the texts of an mteb task (``params["corpus_task"]``).

    The corpus task's data comes from the hub or the local mirror like any mteb task. Scores:
    ``sentence_<measure>`` and ``token_<measure>`` for every measure of :data:`iso_bench.numerics.isotropy.MEASURES`
    (token measures only for models that give token vectors), and ``<level>_isoscore_star``: IsoScore* with its
    authors' evaluation settings, zeta = 0.75 and C0 the covariance of the model's token vectors of the corpus
    (the larger sample of the model's space; at most :data:`C0_POINTS` of them, a seeded sample) mapped as the
    variant maps its sentence vectors (``sentence_map_of_tokens``: the sentence-level fit's transform, its storage
    stage included; for a token-level variant, what its pooling reads, then its stage), so that C0 is in the sentence
    vectors' coordinates and units for every variant: whiten's principal coordinates of its sentence fit, zscore's
    per-axis units, an int8 stage's ranges. For raw the map is the identity, as in the authors' setting; for a model
    without token vectors C0 is the sentence vectors' own covariance (IsoScore* is then IsoScore).
    ``isoscore_star_c0_tokens_mapped`` (1 or 0) records which. For token vectors, C0 is their own covariance, so
    their IsoScore* equals their IsoScore. The main score is the sentence vectors' I(W).
    """

    needs_tokens = True

    def load(self) -> dict[str, list[str]]:
        import mteb  # lazily: mteb takes seconds to import

        task = mteb.get_task(self.card.params["corpus_task"])
        self._source = use_source(task, self.data_dir)
        return {"test": task_texts(task)}

    def source_record(self) -> dict[str, Any]:
        return self._source

    def fit_texts(self) -> list[str]:
        self.load_data()
        return list(self.dataset["test"])

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        texts = self.dataset["test"]
        scores: dict[str, Any] = {"n_sentences": len(texts)}
        vectors = {"sentence": sentence_vectors(model, texts, self, encode_kwargs)}
        if isinstance(model, TokenEncoder):
            vectors["token"] = np.asarray(model.token_vectors(texts, self.metadata.name, task_metadata=self.metadata),
                                          np.float64)
            scores["n_tokens"] = len(vectors["token"])
        c0 = {"token": _c0(vectors["token"])} if "token" in vectors else {}
        mapped = getattr(model, "sentence_map_of_tokens", None)
        if "token" in vectors and mapped is not None:  # the model's tokens under the variant's sentence map
            c0["sentence"] = _c0(np.asarray(mapped(texts, self.metadata.name, task_metadata=self.metadata), np.float64))
        else:  # a model's own token vectors, or none: the sentence vectors' own covariance
            c0["sentence"] = c0["token"] if "token" in vectors else _c0(vectors["sentence"])
        scores["isoscore_star_zeta"] = ISOSCORE_STAR_ZETA
        scores["isoscore_star_c0_tokens_mapped"] = int("token" in vectors)
        for level, X in vectors.items():
            for name, measure in MEASURES.items():
                scores[f"{level}_{name}"] = float(measure(X))
            scores[f"{level}_isoscore_star"] = isoscore_star(X, c0[level], ISOSCORE_STAR_ZETA)
        self.last_units = "a diagnostic of the whole vector set: no per-instance units, no interval"
        return scores


C0_POINTS = 250_000
"""The most token vectors IsoScore*'s C0 is estimated from (the authors': about 250,000)."""


def _c0(X: np.ndarray) -> np.ndarray:
    """The covariance (ddof=1) of ``X``, or of a seeded sample of :data:`C0_POINTS` of its rows."""
    if len(X) > C0_POINTS:
        X = X[np.sort(np.random.default_rng(0).choice(len(X), C0_POINTS, replace=False))]
    return np.atleast_2d(np.cov(X, rowvar=False))


KIND = IsotropyKind
