"""The isotropy kind: a diagnostic, not a benchmark. On a fixed corpus it reports how isotropic each
variant's vectors are (sentence vectors, and the token vectors of the same sentences), so that the
tables can set isotropy beside task scores. It never enters a ranked average.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from iso_bench.isotropy import MEASURES
from iso_bench.kinds.base import IsoTask, sentence_vectors


class IsotropyTask(IsoTask):
    """Isotropy measures of a variant's vectors on the sentences of an mteb STS task's split.

    ``corpus_task`` names the mteb task whose sentences (both columns) form the corpus; its data comes
    from the hub or the local mirror like any mteb task. Scores: ``sentence_<measure>`` and
    ``token_<measure>`` for every measure of :data:`iso_bench.isotropy.MEASURES` (token measures only
    for iso-bench variants); the main score is the sentence vectors' I(W).
    """

    kind = "isotropy"
    needs_tokens = True
    corpus_task: ClassVar[str]
    corpus_split: ClassVar[str] = "test"

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        import mteb

        from iso_bench.data import use_source
        from iso_bench.encoder import task_texts

        task = mteb.get_task(self.corpus_task)
        self._source = use_source(task, self.data_dir)
        self.dataset = {"test": task_texts(task)}
        self.data_loaded = True

    def source_record(self) -> dict[str, Any]:
        return self._source

    def fit_texts(self) -> list[str]:
        self.load_data()
        return list(self.dataset["test"])

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        from iso_bench.encoder import VariantEncoder

        texts = self.dataset["test"]
        scores: dict[str, Any] = {"n_sentences": len(texts)}
        vectors = {"sentence": np.asarray(sentence_vectors(model, texts, self, encode_kwargs), np.float64)}
        if isinstance(model, VariantEncoder):
            vectors["token"] = np.asarray(model.token_vectors(texts, self.metadata.name), np.float64)
            scores["n_tokens"] = len(vectors["token"])
        for level, X in vectors.items():
            for name, measure in MEASURES.items():
                scores[f"{level}_{name}"] = float(measure(X))
        return scores
