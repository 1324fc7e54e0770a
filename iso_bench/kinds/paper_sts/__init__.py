"""STS as the isotropy papers measured it (SentEval layout): Spearman x 100 between the cosine of the two
sentence vectors and the gold score, per subset, aggregated as "all" (subsets concatenated, one
Spearman: SimCSE, SBERT, MTEB) and "wmean" (per-subset Spearman averaged by subset size: BERT-flow and
BERT-whitening tables). STS-B and SICK-R use their test splits (1,379 and 4,927 pairs), as the papers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from iso_bench.kinds.base import IsoTask, card, sentence_vectors
from iso_bench.senteval import load_sts_task, score_sts


class PaperSTSTask(IsoTask):
    """One SentEval STS task. Main score: ``wmean_spearman`` (a fraction, as mteb's scores)."""

    kind = "paper-sts"
    suite = "paper-sts"
    senteval_name: ClassVar[str]  # the name iso_bench.senteval loads: STS12..STS16, STSBenchmark, SICK-R

    def read(self, folder: Path) -> Any:
        return load_sts_task(folder, self.senteval_name)

    def fit_texts(self) -> list[str]:
        self.load_data()
        return list(self.dataset.sentences())

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        gold, predicted = {}, {}
        for subset in self.dataset.subsets:
            a = np.asarray(sentence_vectors(model, list(subset.sentences1), self, encode_kwargs), np.float64)
            b = np.asarray(sentence_vectors(model, list(subset.sentences2), self, encode_kwargs), np.float64)
            cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)
            gold[subset.name], predicted[subset.name] = subset.gold, cos
        result = score_sts(gold, predicted)
        scores: dict[str, Any] = {}
        for agg in ("wmean", "all"):
            corr = getattr(result, agg)
            scores[f"{agg}_spearman"], scores[f"{agg}_pearson"] = corr.spearman / 100, corr.pearson / 100
        for name, corr in result.subsets.items():
            scores[f"spearman_{name}"] = corr.spearman / 100
            scores[f"n_{name}"] = corr.n
        return scores


def paper_sts_card(name: str, what: str, citation: str, reference: str, date: tuple[str, str]) -> Any:
    """The metadata card of a SentEval STS task (shared wording, so each task file stays small)."""
    return card(
        name=name,
        description=(f"{what}, SentEval layout, as the isotropy papers evaluate it: cosine of the two sentence "
                     "vectors against the gold similarity; Spearman per subset aggregated as size-weighted mean (main "
                     "score, wmean_spearman) and over all pairs (all_spearman)."),
        reference=reference, type="STS", main_score="wmean_spearman", version="senteval",
        domains=("News", "Web", "Written"), license="not specified", date=date, citation=citation,
    )
