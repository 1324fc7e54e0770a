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
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.similarity_functions import cos_sim, pairwise_cos_sim

from iso_bench._version import __version__
from iso_bench.backbones.pool_replay import before_pooling, pooled_batches, whole_rows
from iso_bench.checks import one_blas_thread
from iso_bench.data.provider import CorpusProvider
from iso_bench.files import dataset_record
from iso_bench.fitting import Fits
from iso_bench.kernels import describe_environment
from iso_bench.kinds.cards import held_out_sources
from iso_bench.methods import canonical_spec, stage_pooled, storage_of, stored_scores
from iso_bench.numerics import linalg
from iso_bench.results.benchmark import result_record
from iso_bench.results.instances import N_RESAMPLES, track
from iso_bench.vectors.fit_cache import jsonable

logger = logging.getLogger(__name__)


TRANSFORM_ROWS = 16_384  # sentence vectors a variant transforms at a time (every STS task's column at once)


def _one_blas_thread(method: Any) -> Any:
    """Run ``method`` (it fits and transforms) with numpy's BLAS on one thread, beside torch's threads
    (:func:`iso_bench.checks.one_blas_thread`)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return method(*args, **kwargs)

    return wrapper


class _Variant(Fits):
    """The part of a variant that does not depend on mteb: provenance and transforms; its fits are
    :class:`iso_bench.fitting.Fits`."""

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
        self._init_fits()

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

    # ---- transforming -----------------------------------------------------------------------------
    @_one_blas_thread
    def vectors(self, texts: Sequence[str], task_name: str | None, *, task_metadata: Any = None,
                prompt_type: Any = None) -> np.ndarray:
        """Post-processed sentence vectors of ``texts``. ``task_metadata`` and ``prompt_type`` (what mteb hands
        ``encode``) pick the prompt a model's mteb implementation puts before them."""
        method = self.fitted_method(task_name)
        where = {"task_metadata": task_metadata, "prompt_type": prompt_type}
        if self.level == "sentence":  # transformed a block of rows at a time: O(block) working memory
            X, transform = self.store.sentences(texts, **where), whole_rows(method.transform)
            if len(X) <= TRANSFORM_ROWS:
                return transform(X).astype(np.float32)
            out = None
            for a, b in linalg.row_blocks([1] * len(X), TRANSFORM_ROWS):  # never a block of one row
                Z = transform(X[a:b])
                if out is None:
                    out = np.empty((len(X), Z.shape[1]), np.float32)
                out[a:b] = Z
            return out
        parts = list(pooled_batches(self.store, method, self.spec, texts, **where))  # model's pooling and head
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
    def sentence_map_of_tokens(self, texts: Sequence[str], task_name: str | None, *, task_metadata: Any = None,
                               prompt_type: Any = None) -> np.ndarray:
        """The model's token vectors of ``texts`` (special tokens excluded, all rows stacked) under the map this
        variant makes its sentence vectors by: the sentence-level fit's transform (its storage stage included), or
        for a token-level variant what its pooling reads (:func:`~iso_bench.backbones.pool_replay.before_pooling`),
        then its stage. The vectors IsoScore* estimates its C0 from (:mod:`iso_bench.kinds.isotropy`): the larger
        sample, in its sentence vectors' coordinates and units."""
        X = self._token_rows(texts, task_metadata=task_metadata, prompt_type=prompt_type)
        method = self.fitted_method(task_name)
        if self.level == "sentence":
            return whole_rows(method.transform)(X)
        return stage_pooled(method, before_pooling(method, self.spec, self.store.backbone)(X))

    @_one_blas_thread
    def token_vectors(self, texts: Sequence[str], task_name: str | None, *, task_metadata: Any = None,
                      prompt_type: Any = None) -> np.ndarray:
        """Post-processed token vectors of ``texts`` (special tokens excluded), all rows stacked."""
        method = self.fitted_method(task_name, "token")
        return method.transform(self._token_rows(texts, task_metadata=task_metadata, prompt_type=prompt_type)
                                ).astype(np.float32)

    def _token_rows(self, texts: Sequence[str], **where: Any) -> np.ndarray:
        """The model's token vectors of ``texts`` (special tokens excluded), all rows stacked."""
        return np.concatenate([t for t in self.store.tokens(texts, **where) if len(t)], axis=0)


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
        if set(map(type, texts)) <= {str}:  # every value a str (None where a row has none)
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

