"""The papers' STS kind (SentEval layout): Spearman x 100 between the cosine of the two sentence vectors and the
gold score, per subset, aggregated as "all" (subsets concatenated, one Spearman: SimCSE, SBERT, MTEB) and
"wmean" (per-subset Spearman averaged by subset size: BERT-flow and BERT-whitening tables). STS-B and SICK-R
use their test splits (1,379 and 4,927 pairs), as the papers. Readers in :mod:`.data`, scorer in :mod:`.scoring`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.kinds.base import Kind, sentence_vectors
from iso_bench.kinds.paper_sts.data import load_sts_task
from iso_bench.kinds.paper_sts.scoring import score_sts
from iso_bench.numerics.linalg import paired_cosine
from iso_bench.numerics.stats import Units


class PaperSTSKind(Kind):
    """One SentEval STS task (``params["senteval_name"]``). Main score: ``wmean_spearman`` (a fraction).
    Units: each pair's predicted cosine and gold, stratified by subset for ``wmean``."""

    def read(self, folder: Path) -> Any:
        return load_sts_task(folder, self.card.params["senteval_name"])

    def fit_texts(self) -> list[str]:
        self.load_data()
        return list(self.dataset.sentences())

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        gold, predicted = {}, {}
        for subset in self.dataset.subsets:
            a = sentence_vectors(model, list(subset.sentences1), self, encode_kwargs)
            b = sentence_vectors(model, list(subset.sentences2), self, encode_kwargs)
            gold[subset.name], predicted[subset.name] = subset.gold, paired_cosine(a, b)
        result = score_sts(gold, predicted)
        scores: dict[str, Any] = {}
        for agg in ("wmean", "all"):
            corr = getattr(result, agg)
            scores[f"{agg}_spearman"], scores[f"{agg}_pearson"] = corr.spearman / 100, corr.pearson / 100
        for name, corr in result.subsets.items():
            scores[f"spearman_{name}"] = corr.spearman / 100
            scores[f"n_{name}"] = corr.n
        self.last_units = self._units(gold, predicted)
        return scores

    def _units(self, gold: dict[str, Any], predicted: dict[str, Any]) -> Units | str:
        """Per pair: predicted cosine and gold, subsets in order; ``wmean`` resamples within each subset
        (its strata), ``all`` is one Spearman over every pair."""
        names = list(gold)
        units = np.column_stack([np.concatenate([np.asarray(predicted[k], np.float64) for k in names]),
                                 np.concatenate([np.asarray(gold[k], np.float64) for k in names])])
        main = self.metadata.main_score
        if main == "all_spearman":
            return Units(units, "spearman")
        if main != "wmean_spearman":
            return f"main score {main}: only the Spearman aggregates have per-pair units here (no interval)"
        strata = np.repeat(np.arange(len(names)), [len(gold[k]) for k in names])
        return Units(units, "wmean", strata=strata, strata_names=tuple(names))


KIND = PaperSTSKind
