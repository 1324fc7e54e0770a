"""The word-in-context kind (Pilehvar & Camacho-Collados 2019), without training: the cosine of the
two target-word vectors (sub-token mean of each span, post-processed at token level), a threshold
chosen on train, accuracy on dev and test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iso_bench.kinds.base import IsoTask, require_variant
from iso_bench.wic import cosine_pairs, evaluate_wic, labels_of, load_wic

SPLITS = ("train", "dev", "test")


class WiCTask(IsoTask):
    """WiC accuracy with a train-chosen cosine threshold. Main score: test accuracy."""

    kind = "wic"
    needs_tokens = True
    scored_splits = ("dev", "test")

    def read(self, folder: Path) -> dict[str, Any]:
        return {split: load_wic(folder, split) for split in SPLITS}

    def fit_texts(self) -> list[str]:
        self.load_data()
        return [s for split in self.scored_splits for p in self.dataset[split] for s in (p.sentence1, p.sentence2)]

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        variant = require_variant(model, self.metadata.name)
        cosines, labels = {}, {}
        for name, pairs in self.dataset.items():
            a = variant.word_vectors([p.sentence1 for p in pairs], [p.span1 for p in pairs], self.metadata.name)
            b = variant.word_vectors([p.sentence2 for p in pairs], [p.span2 for p in pairs], self.metadata.name)
            cosines[name], labels[name] = cosine_pairs(a, b), labels_of(pairs)
        result = evaluate_wic(cosines, labels, fit_split="train")
        return {"accuracy": result.accuracy["test"], "accuracy_dev": result.accuracy["dev"],
                "accuracy_train": result.accuracy["train"], "threshold": result.threshold,
                "threshold_split": result.fit_split, **{f"n_{k}": v for k, v in result.sizes.items()}}
