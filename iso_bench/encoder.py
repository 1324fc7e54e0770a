"""The mteb wrapper: one post-processing variant of a base encoder, seen by mteb as its own model.

A :class:`VariantEncoder` reads raw vectors from a shared :class:`~iso_bench.vectors.store.EmbeddingStore`
(so N variants cost one encode), fits its method once per fit corpus, and returns transformed vectors.
It never fits on whatever batch ``encode`` receives, and it never looks a task up: it is handed a
:class:`~iso_bench.data.provider.CorpusProvider` that turns the task being evaluated into its fit corpus
(``"task"``: the task's own unlabeled texts, the papers' transductive "target" setting; or a text file).
Every fit is recorded in :attr:`VariantEncoder.fit_records` (corpus, size, SHA-256, seed), which the
runner writes into each result file.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.similarity_functions import cos_sim, pairwise_cos_sim

from iso_bench._version import __version__
from iso_bench.backbones.pool_replay import before_pooling
from iso_bench.checks import one_blas_thread
from iso_bench.data.fit_corpus import FIT_BUDGET, FIT_BUDGET_ENV, fit_budget  # noqa: F401 - named here too
from iso_bench.data.provider import CorpusProvider
from iso_bench.files import cache_not_written, dataset_record, texts_digest
from iso_bench.kernels import describe_environment, fit_kernels
from iso_bench.kinds.cards import held_out_sources
from iso_bench.methods import Method, MethodError, canonical_spec, make_method, stage_pooled, storage_of, stored_scores
from iso_bench.methods.base import fitting_on
from iso_bench.numerics import linalg
from iso_bench.results.benchmark import result_record
from iso_bench.results.instances import N_RESAMPLES, track
from iso_bench.vectors.fit_cache import FOLDER as FIT_FOLDER
from iso_bench.vectors.fit_cache import (
    find_fit,
    fit_key,
    fit_lock,
    jsonable,
    key_name,
    learned_summary,
    save_fit,
)
from iso_bench.vectors.fit_rows import TOKEN_FIT_VALUES, within_values

logger = logging.getLogger(__name__)


FIT_BATCH = 16_384  # texts per batch of a streaming fit
TOKEN_SHARE = 4  # a token-level fit reads at most fit_budget / 4 texts at once (25,000 by default); more stream
TOKEN_BATCH_SHARE = 16  # a streaming token-level fit reads FIT_BATCH / 16 texts (1,024: 10^4 to 10^5 vectors) a time
FIT_VALUES = 1 << 28  # raw values (vectors x dim) over which a streaming method streams: 1 GiB of float32
TRANSFORM_BATCH = 4096  # texts whose token vectors a token-level variant reads at a time
TRANSFORM_TOKENS = 262_144  # token vectors (rows) it transforms and pools at a time, whole texts: O(block) memory
TRANSFORM_ROWS = 16_384  # sentence vectors a variant transforms at a time (every STS task's column at once)


def _one_blas_thread(method: Any) -> Any:
    """Run ``method`` (it fits and transforms) with numpy's BLAS on one thread, beside torch's threads
    (:func:`iso_bench.checks.one_blas_thread`)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return method(*args, **kwargs)

    return wrapper


class _Variant:
    """The part of a variant that does not depend on mteb: fit bookkeeping and transforms."""

    def __init__(self, store: Any, method: str, *, corpus: CorpusProvider | str = "task", seed: int = 0,
                 data_dir: str | Path | None = None, n_resamples: int = N_RESAMPLES) -> None:
        self.n_resamples = int(n_resamples)  # bootstrap resamples of each result's recorded interval
        self.base_record: dict[str, Any] = {}  # model, revision, extraction, environment, command
        self.data_sources: dict[str, Any] = {}  # task name -> data source record, where the caller knows it
        self._seen: dict[str, dict[str, Any]] = {}  # task name -> type and data, from the metadata mteb hands over
        self._meta: Any = None
        self.setup: dict[str, Any] | None = None  # the experiment kwargs its results are filed under, where set
        self.store = store
        self.method_spec = method
        self.seed = seed
        self._prototype, self.level = self._new_method(method)
        self.corpus = corpus if isinstance(corpus, CorpusProvider) else CorpusProvider(
            corpus, data_dir=data_dir, held_out_sources=held_out_sources())
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

    @property
    def spec(self) -> str:
        """Canonical method spec, with ``-level=...`` when the level is not the method's default. The run's
        seed is not part of it (it is part of the setup, like the fit corpus): ``cluster-pca`` under
        ``--seeds 0 1 2`` is one variant in three setups; a seed the spec itself sets stays in it."""
        return canonical_spec(self.method_spec)

    def config(self) -> dict[str, Any]:
        corpus = Path(self.corpus.setting).name if self.corpus.is_file else self.corpus.setting  # a file by its name
        return {"method": self.spec, "params": jsonable(self._prototype.get_params()), "level": self.level,
                "fit_corpus": corpus, "seed": self.seed}

    # ---- provenance ---------------------------------------------------------------------------------
    @property
    def mteb_model_meta(self) -> Any:
        return self._meta

    @mteb_model_meta.setter
    def mteb_model_meta(self, meta: Any) -> None:
        """mteb sets this after loading; results written for ``meta`` then carry :meth:`provenance`. Where the
        encoder knows its setup (:attr:`setup`, set by its mteb loader), that is the meta's experiment kwargs,
        whatever other keyword arguments of ``mteb.get_model`` mteb merged into them."""
        if self.setup is not None and dict(meta.experiment_kwargs or {}) != self.setup:
            meta = meta.model_copy(update={"experiment_kwargs": self.setup or None})
        self._meta = meta
        track(meta, self)

    def note_task(self, task_metadata: Any) -> None:
        """Remember the type and data source of a task being evaluated (from the metadata mteb hands over)."""
        name = task_metadata.name
        if name not in self._seen:
            self._seen[name] = {"type": task_metadata.type, "data": dataset_record(task_metadata.dataset)}
            if getattr(getattr(self.store, "backbone", None), "instruct", False):  # the instructions it ran with
                self._seen[name]["instructions"] = {p or "none": self.store.prompt(task_metadata, p) or ""
                                                    for p in (None, "query", "document")}

    def provenance(self, task_name: str) -> dict[str, Any]:
        """The ``iso_bench`` record of this variant's result on ``task_name``: model, revision, extraction,
        method and its setup, environment, task type, data source and the fit corpus (size, SHA-256, seed)."""
        if task_name not in self._seen:
            import mteb  # lazily: mteb takes seconds to import

            self.note_task(mteb.get_task(task_name).metadata)
        seen = self._seen[task_name]
        fit_corpus = self.corpus.setting if type(self._prototype).fitted else None
        return {"iso_bench_version": __version__, **self.base_record, "variant": self.config(),
                "benchmark": result_record(self.spec, fit_corpus, self.n_resamples),
                "task_type": seen["type"], "data": self.data_sources.get(task_name) or seen["data"],
                "fit": self.fit_records.get(task_name),
                "storage": storage_of(self._by_task.get((task_name, self.level), self._prototype), self),
                **({"instructions": seen["instructions"]} if "instructions" in seen else {})}

    # ---- fitting ----------------------------------------------------------------------------------
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
                        else:
                            X = self._fit_matrix(corpus, level) if X is None else X
                            n_vectors = len(X)
                            if level == "token" and method.needs_token_types():
                                method.fit(X, token_types=self._fit_token_types(corpus, n_vectors))
                            else:
                                method.fit(X)
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
                       groups=groups, method=method, level=level, kernels=fit_kernels())

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

    # ---- transforming -----------------------------------------------------------------------------
    @_one_blas_thread
    def vectors(self, texts: Sequence[str], task_name: str | None, *, task_metadata: Any = None,
                prompt_type: Any = None) -> np.ndarray:
        """Post-processed sentence vectors of ``texts``. ``task_metadata`` and ``prompt_type`` (what mteb hands
        ``encode``) pick the prompt a model's mteb implementation puts before them."""
        method = self.fitted_method(task_name)
        where = {"task_metadata": task_metadata, "prompt_type": prompt_type}
        if self.level == "sentence":  # transformed a block of rows at a time: O(block) working memory
            X = self.store.sentences(texts, **where)
            if len(X) <= TRANSFORM_ROWS:
                return method.transform(X).astype(np.float32)
            out = None
            for i in range(0, len(X), TRANSFORM_ROWS):
                Z = method.transform(X[i:i + TRANSFORM_ROWS])
                if out is None:
                    out = np.empty((len(X), Z.shape[1]), np.float32)
                out[i:i + len(Z)] = Z
            return out
        parts, transform = [], before_pooling(method, self.spec, self.store.backbone)
        for i in range(0, len(texts), TRANSFORM_BATCH):  # the pooled rows of a batch of texts at a time
            batch = list(texts[i:i + TRANSFORM_BATCH])
            rows = self.store.pool_rows(batch, **where)  # what the model's pooling reads, transformed, then pooled
            lengths = [len(r) for r in rows]
            if min(lengths, default=1) == 0:
                empty = [batch[j] for j, n in enumerate(lengths) if n == 0][:3]
                raise ValueError(f"texts without any token cannot be pooled at token level: {empty!r}")
            for a, b in linalg.row_blocks(lengths, TRANSFORM_TOKENS):  # a method's float64 copies: a block's, not all
                Z, ends = transform(np.concatenate(rows[a:b], axis=0)), np.cumsum(lengths[a:b])
                parts.append(self.store.backbone.pool(np.split(Z, ends[:-1]), **where))
        Z = np.concatenate(parts, axis=0) if parts else np.zeros((0, self.store.backbone.dim), np.float32)
        return stage_pooled(method, Z)  # a storage stage stores the sentence vector

    @_one_blas_thread
    def word_vectors(self, texts: Sequence[str], spans: Sequence[tuple[int, int]], task_name: str | None, *,
                     task_metadata: Any = None, prompt_type: Any = None) -> np.ndarray:
        """Post-processed vectors of target words: the sub-token mean of each character span in its
        text, transformed by the method fitted on token vectors (word-level tasks are token-level)."""
        method = self.fitted_method(task_name, "token")
        X = self.store.spans(texts, spans, task_metadata=task_metadata, prompt_type=prompt_type)
        ok = np.isfinite(X).all(axis=1)  # spans beyond max_length stay NaN for the task to count
        if not ok.any():
            raise ValueError(f"{task_name}: no target word lies within the model's max_length")
        Z = method.transform(X[ok])
        out = np.full((len(X), Z.shape[1]), np.nan, np.float32)
        out[ok] = Z
        return out

    @_one_blas_thread
    def token_vectors(self, texts: Sequence[str], task_name: str | None, *, task_metadata: Any = None,
                      prompt_type: Any = None) -> np.ndarray:
        """Post-processed token vectors of ``texts`` (special tokens excluded), all rows stacked."""
        method = self.fitted_method(task_name, "token")
        toks = [t for t in self.store.tokens(texts, task_metadata=task_metadata, prompt_type=prompt_type) if len(t)]
        return method.transform(np.concatenate(toks, axis=0)).astype(np.float32)


class VariantEncoder(_Variant, AbsEncoder):
    """One post-processing variant of a base encoder, as an mteb encoder.

    Example:
        >>> enc = VariantEncoder(store, "whiten")                          # doctest: +SKIP
        >>> mteb.evaluate(enc, mteb.get_task("STSBenchmark"))              # doctest: +SKIP
    """

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts = _texts(inputs)
        self.note_task(task_metadata)
        return self.vectors(texts, task_metadata.name, task_metadata=task_metadata, prompt_type=prompt_type)

    # The similarity of the variant's ModelMeta: the base model's, as mteb scores it (cosine where none is known);
    # a binary stage's vectors scored from their Hamming distance exactly (iso_bench.methods.stages.stored_scores).
    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        return stored_scores(self._prototype, self._meta, super().similarity, cos_sim, embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        return stored_scores(self._prototype, self._meta, super().similarity_pairwise, pairwise_cos_sim,
                             embeddings1, embeddings2, pairwise=True)


def _texts(inputs: Any) -> list[str]:
    """The texts of the batches mteb hands ``encode``, in order. mteb's loaders are plain sequential
    DataLoaders over a dataset with a ``"text"`` column, whose batches (default collation) are that column's
    values in order: the column is read at once, not collated batch by batch (a tenth of a second per
    evaluation). Any other iterable of batches is iterated."""
    from torch.utils.data import DataLoader, SequentialSampler  # lazily: torch takes seconds to import

    dataset = getattr(inputs, "dataset", None)
    column_names = getattr(dataset, "column_names", None) or ()
    plain = getattr(dataset, "format", {}).get("type", "custom") is None  # no torch format, no set_transform
    if (isinstance(inputs, DataLoader) and isinstance(inputs.sampler, SequentialSampler) and "text" in column_names
            and inputs.batch_size is not None and plain):
        texts = dataset.with_format("arrow")["text"].to_pylist()  # the rows in order, through any select()
        if all(isinstance(t, str) for t in texts):
            return texts
    return [t for batch in inputs for t in batch["text"]]


def base_record(backbone: Any, command: str | None = None) -> dict[str, Any]:
    """What every result of a backbone's variants records about how its vectors were made: the extraction, with
    the kernels' mode and class (:mod:`iso_bench.kernels`), and the environment, with the kernels in force."""
    environment = describe_environment(backbone.device)
    extraction = {**backbone.describe()["extraction"], "kernels": environment["kernels"]["mode"],
                  "kernel_class": environment["kernels"]["class"]}
    return {"model": backbone.model_id, "revision": backbone.revision, "extraction": extraction,
            "environment": environment, "command": command}

