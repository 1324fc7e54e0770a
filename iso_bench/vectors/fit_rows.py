"""How many token vectors a fit corpus gives, and a sample of it whose token vectors fit in memory.

A token-level fit that does not stream (cluster-pca, and any method at ``-level=token`` that learns from the whole
matrix) holds every token vector of its corpus at once, and a few copies of them: at 4,096 dimensions (an LLM
embedder) a text's token vectors take 16 KB each, and the 25,000 SemCor sentences of a held-out fit give 615,000 of
them, 10 GB of float32 before any copy. :func:`within_values` keeps such a fit under a number of values (vectors
times dimensions) by a seeded sample of the corpus's texts, recorded as the fit budget's sample is (``sample``,
``sample_seed``, ``n_texts_total``, ``sample_reason: "fit values"``). Rows are counted with the backbone's tokenizer
(:meth:`iso_bench.vectors.store.EmbeddingStore.token_ids`), never by reading vectors.

Example:
    >>> within_values(store, corpus, limit=5 << 28, seed=0).record.get("sample")       # doctest: +SKIP
    13240
"""

from __future__ import annotations

from typing import Any

from iso_bench.backbones.mteb_backbone import TokenVectorsUnavailable

TOKEN_FIT_VALUES = 5 << 28  # raw values a token-level fit that does not stream holds at most (5 GiB of float32):
# above all-mpnet-base-v2's SciFact (1.2e9, the v2 board's largest), 327,680 vectors at 4,096-d; more are sampled
SHRINK = 0.98  # a sample over the limit (longer texts than the corpus's on average) is taken again this much smaller


class _Rows:
    """Each text's number of token vectors (its rows in :meth:`~iso_bench.vectors.store.EmbeddingStore.tokens`),
    per prompt type, counted with the tokenizer once per text as samples ask for them."""

    def __init__(self, store: Any, corpus: Any) -> None:
        self.store, self.task_metadata, self.known = store, corpus.task_metadata, {}

    def __call__(self, groups: Any) -> int:
        total = 0
        for prompt_type, texts in groups:
            known = self.known.setdefault(prompt_type, {})
            new = [t for t in texts if t not in known]
            if new:
                ids = self.store.token_ids(new, task_metadata=self.task_metadata, prompt_type=prompt_type)
                known.update((t, len(i)) for t, i in zip(new, ids, strict=True))
            total += sum(known[t] for t in texts)
        return total


def within_values(store: Any, corpus: Any, limit: int, seed: int, within: Any = None) -> Any:
    """``within`` (the fit budget's sample of ``corpus``; default: ``corpus``) when its token vectors hold at most
    ``limit`` values (rows x the model's width), else a seeded sample of ``corpus``
    (:meth:`iso_bench.data.fit_corpus.FitCorpus.sample`) that does: of the size the corpus's mean rows per text
    allow, made :data:`SHRINK` times smaller until it fits. A corpus whose rows cannot be counted (a backbone
    without token types) is returned as it is."""
    within = corpus if within is None else within
    dim = int(store.backbone.dim)
    max_rows = getattr(store.backbone, "max_length", None) or 512
    if len(within.texts) * max_rows * dim <= limit:  # no text gives more rows than the model's max length
        return within
    rows = _Rows(store, corpus)
    try:
        total = rows(within.groups)
    except TokenVectorsUnavailable:
        return within
    if total * dim <= limit:
        return within
    size = max(1, int(len(within.texts) * limit / (total * dim)))
    while True:
        sample = corpus.sample(size, seed, reason="fit values")
        if rows(sample.groups) * dim <= limit or size == 1:
            return sample
        size = max(1, int(size * SHRINK))
