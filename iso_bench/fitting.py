"""The fits of a variant: each method fitted once per fit corpus and level, read from the fit cache where it was
fitted before, streamed or sampled within the fit budget, and recorded.

:class:`Fits` is the half of :class:`iso_bench.encoder.VariantEncoder` that fits (the other half, in
:mod:`iso_bench.encoder`, is mteb's face: provenance and transforms). A fit reads the raw vectors of its corpus
(:class:`~iso_bench.data.provider.CorpusProvider`: the task's own texts, a held-out corpus or a file) from the
shared :class:`~iso_bench.vectors.store.EmbeddingStore`: whole where they fit the budget, batch by batch for a
streaming method (:meth:`Method.partial_fit`), else a seeded sample that the fit's record names. Every fit is
recorded in :attr:`Fits.fit_records` (corpus, size, SHA-256, seed, vectors, where it ran). A token-level variant's
int8 stage is calibrated in the same fit, on the fit corpus's pooled sentence vectors (:meth:`Fits._calibrate_pooled`),
and saved with it.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from iso_bench.backbones.pool_replay import pooled_batches
from iso_bench.data.fit_corpus import fit_budget
from iso_bench.files import cache_not_written, texts_digest
from iso_bench.kernels import fit_kernels
from iso_bench.methods import Method, MethodError, make_method
from iso_bench.methods.base import fitting_on
from iso_bench.methods.stages import extremes
from iso_bench.numerics import linalg
from iso_bench.vectors.fit_cache import FOLDER as FIT_FOLDER
from iso_bench.vectors.fit_cache import find_fit, fit_key, fit_lock, key_name, learned_summary, save_fit
from iso_bench.vectors.fit_rows import TOKEN_FIT_VALUES, within_values

FIT_BATCH = 16_384  # texts per batch of a streaming fit
TOKEN_SHARE = 4  # a token-level fit reads at most fit_budget / 4 texts at once (25,000 by default); more stream
TOKEN_BATCH_SHARE = 16  # a streaming token-level fit reads FIT_BATCH / 16 texts (1,024: 10^4 to 10^5 vectors) a time
FIT_VALUES = 1 << 28  # raw values (vectors x dim) over which a streaming method streams: 1 GiB of float32

class Fits:
    """Fit bookkeeping of one variant: its method fitted once per fit corpus and level, then reused. Needs
    ``store``, ``method_spec``, ``seed``, ``corpus`` (a :class:`CorpusProvider`), ``spec``, ``_prototype`` and
    ``level`` on the instance; :meth:`_init_fits` sets the rest."""

    def _init_fits(self) -> None:
        self._fitted: dict[str, Method] = {}
        self._by_task: dict[tuple[str | None, str], Method] = {}  # (task name, level) -> its fitted method
        self.fit_records: dict[str, dict[str, Any]] = {}
        self.fit_seconds = 0.0  # wall time spent in method.fit, for benchmarks (never written to results)
        self.fits_run = 0  # fits computed by this variant
        self.fits_loaded = 0  # fits read from the fit cache
        # texts a fit reads at once (the provider's --fit-budget, else the default): more stream, or are sampled
        self.fit_budget = fit_budget() if self.corpus.budget is None else int(self.corpus.budget)
        self._samples: dict[tuple[str, int], Any] = {}  # (corpus key, budget) -> its sample within the budget

    def _new_method(self, spec: str) -> tuple[Method, str]:
        """Build the method; the run's seed applies unless the spec sets one."""
        method, level = make_method(spec)
        if "seed" in method.param_defaults() and "seed=" not in spec:
            method.seed = self.seed
        return method, level

    def fitted_method(self, task_name: str | None, level: str | None = None) -> Method:
        """The method fitted on the corpus that applies to ``task_name``, on vectors of ``level``
        (default: the variant's own level); fitted once per corpus and level, then reused."""
        level = level or self.level
        if not type(self._prototype).fitted:
            self.fit_records.setdefault(task_name or "", {"fit_corpus": None})
            return self._prototype
        if (task_name, level) in self._by_task:  # every batch mteb hands over: the corpus is not built again
            return self._by_task[(task_name, level)]
        corpus = self._within_budget(self.corpus(task_name), level)
        key = f"{corpus.key}@{level}"
        if key not in self._fitted:
            method = self._new_method(self.method_spec)[0]
            device = str(getattr(getattr(self.store, "backbone", None), "device", "cpu"))
            if device.startswith("cuda"):  # the model's GPU: flow trains there, large products run there
                method.device = device
            with self._stored_fit(corpus, level, method) as (stored, fit, store_at), fitting_on(corpus.label):
                if stored is None:
                    started, n_vectors = time.perf_counter(), 0
                    try:
                        streamed, X = self._stream_fit(method, corpus, level) if method.streaming() else (None, None)
                        if streamed is not None:
                            n_vectors = streamed
                            if getattr(method, "calibrates", False):  # an int8 stage: its ranges, a second pass
                                method.calibrate_batches(self._fit_batches(corpus, level))
                        else:
                            X = self._fit_matrix(corpus, level) if X is None else X
                            n_vectors = len(X)
                            if level == "token" and method.needs_token_types():
                                method.fit(X, token_types=self._fit_token_types(corpus, n_vectors))
                            else:
                                method.fit(X)
                            del X  # the token vectors: the pooled calibration reads the corpus a batch at a time
                        if self._calibrates_pooled(method, level):
                            self._calibrate_pooled(method, corpus)
                    except MethodError as exc:
                        where = f"fit corpus {corpus.key}: {corpus.describe()}, {n_vectors} {level} vectors"
                        raise MethodError(f"{exc} ({where})") from exc
                    self.fit_seconds += time.perf_counter() - started
                    self.fits_run += 1
                    fit = {"level": level, "n_vectors": int(n_vectors)}
                    if linalg.gpu_device(method.device) is not None:  # computed on a GPU: the same up to rounding, said
                        fit["device"] = str(method.device)
                    if store_at is not None:
                        try:
                            save_fit(*store_at, method, fit)
                        except OSError as exc:  # a full disk: the fit is in memory, the result is written
                            cache_not_written(store_at[0], exc, "fit")
                else:
                    method = stored
                    self.fits_loaded += 1
            self._fitted[key] = method
            learned = learned_summary(method)
            if learned:
                fit = {**fit, "learned": learned}
            entry = self.fit_records.setdefault(corpus.key, {**corpus.to_record(), "seed": self.seed, "fits": []})
            entry["fits"].append(fit)
        if task_name is not None:
            self.fit_records[task_name] = self.fit_records[corpus.key]
        self._by_task[(task_name, level)] = self._fitted[key]
        return self._fitted[key]

    def _fit_key(self, corpus: Any, level: str, method: Method) -> dict[str, Any]:
        """What the fit of ``method`` on ``corpus`` at ``level`` depends on
        (:func:`iso_bench.vectors.fit_cache.fit_key`)."""
        folder = self.store.folder
        groups = [{"prompt_type": None if p is None else str(getattr(p, "value", p)),
                   "prompt": self.store.prompt(corpus.task_metadata, p), "texts_sha256": texts_digest(texts)}
                  for p, texts in corpus.groups]
        return fit_key(namespace="/".join(folder.parts[-3:]), corpus={"key": corpus.key, **corpus.to_record()},
                       groups=groups, method=method, level=level, kernels=fit_kernels(),
                       calibration="pooled" if self._calibrates_pooled(method, level) else None)

    def _calibrates_pooled(self, method: Method, level: str) -> bool:
        """Whether the fit of ``method`` at ``level`` also calibrates its int8 stage on the fit corpus's pooled
        sentence vectors: a token-level variant's fit at token level (a sentence-level variant's token-level fit,
        for a word task, calibrates on the token vectors it fits on)."""
        return level == "token" and self.level == "token" and getattr(method, "calibrates", False)

    def _calibrate_pooled(self, method: Any, corpus: Any) -> None:
        """Calibrate a token-level variant's int8 stage (:meth:`~iso_bench.methods.stages.Int8.calibrate_pooled`)
        on the pooled sentence vectors of its fit corpus, and of nothing else: its texts' rows the pooling reads
        (``store.pool_rows``), transformed by the fitted method (``before_pooling``), then the model's own pooling
        and head (``backbone.pool``), as the variant's sentence vectors are made
        (:func:`~iso_bench.backbones.pool_replay.pooled_batches`); each dimension's minimum and maximum kept as they
        come (no matrix of the corpus)."""
        found = extremes(P for prompt_type, texts in corpus.groups for P in pooled_batches(
            self.store, method, self.spec, list(texts), skip_empty=True, desc="fit corpus",
            task_metadata=corpus.task_metadata, prompt_type=prompt_type))
        if found is None:
            raise MethodError(f"method {self.spec!r}: fit corpus {corpus.key} has no text to pool for its int8 ranges")
        method.calibrate_pooled(*found)

    @contextmanager
    def _stored_fit(self, corpus: Any, level: str, method: Method) -> Iterator[tuple[Any, Any, Any]]:
        """``(method, record, (path, key))``: the fit found in the fit cache (:mod:`iso_bench.vectors.fit_cache`) with
        its record, else ``None`` for both; and where to store a new fit, ``None`` where nothing is stored (a
        memory-only store, or ``ISO_BENCH_NO_FIT_CACHE=1``); the fit's lock held for the block (``fit_lock``)."""
        if getattr(self.store, "folder", None) is None or os.environ.get("ISO_BENCH_NO_FIT_CACHE") == "1":
            yield None, None, None
            return
        key = self._fit_key(corpus, level, method)
        path = self.store.folder / FIT_FOLDER / key_name(key)
        with fit_lock(path):
            yield (*find_fit(path, key, method), (path, key))

    def _within_budget(self, corpus: Any, level: str = "sentence") -> Any:
        """The fit corpus a fit reads: ``corpus`` itself when it has at most ``fit_budget`` texts (a quarter
        of it for a token-level fit, whose texts give 10 to 100 vectors each), or when the method streams
        (its statistics accumulate batch by batch, :meth:`_fit_batches`); else a seeded sample of that many
        texts, recorded as ``--fit-sample`` records one. A token-level fit's sample is smaller where its token
        vectors would hold more than :data:`TOKEN_FIT_VALUES` values (:func:`within_values`: an LLM's width)."""
        budget = self._budget(level)
        if self._prototype.streaming():
            return corpus
        within, at = corpus, (corpus.key, budget)  # each level's fit takes a sample of its own size
        if len(corpus.texts) > budget:
            if at not in self._samples:
                self._samples[at] = corpus.sample(budget, self.seed, reason="fit budget")
            within = self._samples[at]
        if level == "sentence":
            return within
        if self._samples.get((*at, "values")) is None:
            found = within_values(self.store, corpus, TOKEN_FIT_VALUES, self.seed, within)
            if found is within:
                return within
            self._samples[(*at, "values")] = found
        return self._samples[(*at, "values")]

    def _budget(self, level: str) -> int:
        """Texts a fit of ``level`` vectors reads at once: the fit budget for sentence vectors, a quarter of
        it for token vectors (a text gives 10 to 100 of them)."""
        return self.fit_budget if level == "sentence" else max(1, self.fit_budget // TOKEN_SHARE)

    def _fit_batches(self, corpus: Any, level: str) -> Any:
        """The raw vectors of a fit corpus, ``FIT_BATCH`` texts at a time (``FIT_BATCH / TOKEN_BATCH_SHARE``
        at token level), prompt type by prompt type: what a streaming fit reads, so that no fit holds a whole
        corpus."""
        step = FIT_BATCH if level == "sentence" else max(1, FIT_BATCH // TOKEN_BATCH_SHARE)
        for prompt_type, texts in corpus.groups:
            where = {"task_metadata": corpus.task_metadata, "prompt_type": prompt_type}
            for i in range(0, len(texts), step):
                batch = list(texts[i:i + step])
                if level == "sentence":
                    yield self.store.sentences(batch, desc="fit corpus", remember=False, **where)
                else:
                    toks = [t for t in self.store.tokens(batch, desc="fit corpus", **where) if len(t)]
                    if toks:
                        yield np.concatenate(toks, axis=0)

    def _stream_fit(self, method: Method, corpus: Any, level: str) -> tuple[int | None, np.ndarray | None]:
        """Fit a streaming method batch by batch when its corpus has more texts than the budget or more than
        :data:`FIT_VALUES` raw values: ``(vectors fitted, None)``. Else nothing is fitted: ``(None, the corpus's
        matrix)`` where its token vectors were read to count them (the rows of :meth:`_fit_matrix`, in its
        order), ``(None, None)`` where they were not."""
        batches, held, values = self._fit_batches(corpus, level), [], 0
        if len(corpus.texts) <= self._budget(level):
            dim = getattr(getattr(self.store, "backbone", None), "dim", None)
            if level == "sentence" and (dim is None or len(corpus.texts) * dim <= FIT_VALUES):
                return None, None  # one vector per text: no need to read them to count
            for X in batches:
                held.append(X)
                values += X.size
                if values > FIT_VALUES:
                    break
            else:
                return None, (np.concatenate(held, axis=0) if held else None)
        n_vectors = 0
        for X in itertools.chain(held, batches):
            method.partial_fit(X)
            n_vectors += len(X)
        method.finalize()
        return n_vectors, None

    def _fit_matrix(self, corpus: Any, level: str) -> np.ndarray:
        """The raw vectors of a fit corpus, each text encoded with its own prompt type (retrieval: queries
        and documents); sentence vectors, or every token vector stacked."""
        parts = []
        for prompt_type, texts in corpus.groups:
            where = {"task_metadata": corpus.task_metadata, "prompt_type": prompt_type}
            if level == "sentence":
                parts.append(self.store.sentences(list(texts), desc="fit corpus", **where))
            else:
                parts += [t for t in self.store.tokens(list(texts), desc="fit corpus", **where) if len(t)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)  # one matrix: no copy of it

    def _fit_token_types(self, corpus: Any, n_vectors: int) -> np.ndarray:
        """The token type (tokenizer id) of every row of :meth:`_fit_matrix` at token level, in its order."""
        parts = []
        for prompt_type, texts in corpus.groups:
            where = {"task_metadata": corpus.task_metadata, "prompt_type": prompt_type}
            parts += [t for t in self.store.token_ids(list(texts), **where) if len(t)]
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if len(ids) != n_vectors:
            raise MethodError(f"method {self.spec!r}: the tokenizer gives {len(ids)} token types for the "
                              f"{n_vectors} token vectors of fit corpus {corpus.key}; the model's token vectors "
                              "cannot be matched to its tokens, so fit it with weights=zipf")
        return ids
