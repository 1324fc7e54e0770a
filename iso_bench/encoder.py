"""The mteb wrapper: one post-processing variant of a base encoder, seen by mteb as its own model.

A :class:`VariantEncoder` reads raw vectors from a shared :class:`~iso_bench.cache.EmbeddingStore`
(so N variants cost one encode), fits its method once per fit corpus, and returns transformed vectors.
It never fits on whatever batch ``encode`` receives: the fit corpus is named up front, either

- ``"task"``: the unlabeled texts of the evaluated task's evaluation splits, both sides of every pair
  (the papers' "target" setting; numbers fit this way are transductive), or
- a path to a UTF-8 text file with one text per line,

and every fit is recorded in :attr:`VariantEncoder.fit_records` (corpus, size, SHA-256, seed), which
the runner writes into each result file.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.similarity_functions import cos_sim, pairwise_cos_sim

from iso_bench.data import FitCorpusError
from iso_bench.methods import Method, MethodError, make_method

logger = logging.getLogger(__name__)


def texts_digest(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\n")
    return h.hexdigest()


def read_text_file(path: str | Path) -> list[str]:
    """One text per non-empty line of a UTF-8 file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FitCorpusError(
            f"fit corpus file {p} does not exist; pass --fit-corpus task or a text file, one text per line"
        )
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise FitCorpusError(f"fit corpus file {p} is not UTF-8 text: {exc}") from exc
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise FitCorpusError(f"fit corpus file {p} has no non-empty lines")
    return texts


def task_texts(task: Any) -> list[str]:
    """The unlabeled texts of a loaded mteb task's evaluation splits, both sides of every pair,
    deduplicated in first-seen order. A task may define ``fit_texts()`` to say what they are."""
    if hasattr(task, "fit_texts"):
        return list(dict.fromkeys(task.fit_texts()))
    columns = getattr(task, "column_names", None)
    dataset = task.dataset
    texts: list[str] = []
    for subset in task.hf_subsets or ["default"]:
        for split in task.metadata.eval_splits:
            data = dataset[split] if (subset == "default" and subset not in dataset) else dataset[subset][split]
            cols = [c for c in (columns or data.column_names) if isinstance(c, str)]
            for col in cols:
                values = _column(data, col)
                if values and isinstance(values[0], str):
                    texts.extend(values)
    return list(dict.fromkeys(texts))


def _column(data: Any, col: str) -> list[Any]:
    """One column as a list; read from a ``datasets.Dataset``'s Arrow table in one call (indexing the
    Dataset would format it row by row, which costs seconds per task and variant)."""
    table = getattr(data, "data", None)
    if hasattr(table, "column") and getattr(data, "_indices", None) is None:
        return table.column(col).to_pylist()
    return list(data[col])


class _Variant:
    """The part of a variant that does not depend on mteb: fit bookkeeping and transforms."""

    def __init__(self, store: Any, method: str, *, fit_corpus: str = "task", seed: int = 0,
                 data_dir: str | Path | None = None, tasks: dict[str, Any] | None = None) -> None:
        self.store = store
        self.method_spec = method
        self.seed = seed
        self._prototype, self.level = self._new_method(method)
        self.fit_corpus = fit_corpus
        self.data_dir = data_dir
        self.tasks = tasks if tasks is not None else {}
        self._fitted: dict[str, Method] = {}
        self.fit_records: dict[str, dict[str, Any]] = {}
        self.fit_seconds = 0.0  # wall time spent in method.fit, for benchmarks (never written to results)

    def _new_method(self, spec: str) -> tuple[Method, str]:
        """Build the method; the run's seed applies unless the spec sets one."""
        method, level = make_method(spec)
        if "seed" in method.param_defaults() and "seed=" not in spec:
            method.seed = self.seed
        return method, level

    @property
    def spec(self) -> str:
        """Canonical method spec, with ``-level=...`` when the level is not the method's default."""
        spec = self._prototype.spec
        if self.level != type(self._prototype).default_level:
            spec += f"-level={self.level}"
        return spec

    def config(self) -> dict[str, Any]:
        return {"method": self.spec, "params": _jsonable(self._prototype.get_params()),
                "level": self.level, "fit_corpus": self.fit_corpus, "seed": self.seed}

    # ---- fitting ----------------------------------------------------------------------------------
    def _corpus(self, task_name: str | None) -> tuple[str, list[str], dict[str, Any]]:
        if self.fit_corpus == "task":
            if task_name is None:
                raise FitCorpusError("fit corpus 'task' needs the task being evaluated")
            task = self.tasks.get(task_name)
            if task is None:
                import mteb

                from iso_bench.data import use_source

                task = mteb.get_task(task_name)
                use_source(task, self.data_dir)
                self.tasks[task_name] = task
            texts = task_texts(task)
            record = {"fit_corpus": "task", "task": task_name, "splits": list(task.metadata.eval_splits)}
            return f"task:{task_name}", texts, record
        texts = read_text_file(self.fit_corpus)
        record = {"fit_corpus": "file", "path": str(Path(self.fit_corpus).expanduser().resolve())}
        return f"file:{self.fit_corpus}", texts, record

    def fitted_method(self, task_name: str | None, level: str | None = None) -> Method:
        """The method fitted on the corpus that applies to ``task_name``, on vectors of ``level``
        (default: the variant's own level); fitted once per corpus and level, then reused."""
        level = level or self.level
        if not type(self._prototype).fitted:
            self.fit_records.setdefault(task_name or "", {"fit_corpus": None})
            return self._prototype
        corpus, texts, record = self._corpus(task_name)
        key = f"{corpus}@{level}"
        if key not in self._fitted:
            X = self._fit_matrix(texts, level)
            method = self._new_method(self.method_spec)[0]
            started = time.perf_counter()
            try:
                method.fit(X)
            except MethodError as exc:
                where = f"fit corpus {corpus}: {len(texts)} texts, {len(X)} {level} vectors"
                raise MethodError(f"{exc} ({where})") from exc
            self.fit_seconds += time.perf_counter() - started
            self._fitted[key] = method
            fit = {"level": level, "n_vectors": int(len(X))}
            learned = _learned_summary(method)
            if learned:
                fit["learned"] = learned
            entry = self.fit_records.setdefault(corpus, {
                **record, "n_texts": len(texts), "texts_sha256": texts_digest(texts), "seed": self.seed, "fits": []})
            entry["fits"].append(fit)
        if task_name is not None:
            self.fit_records[task_name] = self.fit_records[corpus]
        return self._fitted[key]

    def _fit_matrix(self, texts: list[str], level: str) -> np.ndarray:
        if level == "sentence":
            return self.store.sentences(texts, desc="fit corpus")
        toks = self.store.tokens(texts, desc="fit corpus")
        return np.concatenate([t for t in toks if len(t)], axis=0)

    # ---- transforming -----------------------------------------------------------------------------
    def vectors(self, texts: Sequence[str], task_name: str | None) -> np.ndarray:
        """Post-processed sentence vectors of ``texts``."""
        method = self.fitted_method(task_name)
        if self.level == "sentence":
            return method.transform(self.store.sentences(texts)).astype(np.float32)
        toks = self.store.tokens(texts)
        lengths = [len(t) for t in toks]
        if min(lengths, default=1) == 0:
            empty = [texts[i] for i, n in enumerate(lengths) if n == 0][:3]
            raise ValueError(f"texts without any non-special token cannot be pooled at token level: {empty!r}")
        Z = method.transform(np.concatenate(toks, axis=0))
        bounds = np.cumsum([0, *lengths])
        pooled = np.stack([Z[bounds[i] : bounds[i + 1]].mean(0) for i in range(len(toks))])
        if getattr(self.store.backbone.extraction, "normalize", False):
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32)

    def word_vectors(self, texts: Sequence[str], spans: Sequence[tuple[int, int]], task_name: str | None) -> np.ndarray:
        """Post-processed vectors of target words: the sub-token mean of each character span in its
        text, transformed by the method fitted on token vectors (word-level tasks are token-level)."""
        method = self.fitted_method(task_name, "token")
        X = self.store.spans(texts, spans)
        ok = np.isfinite(X).all(axis=1)  # spans beyond max_length stay NaN for the task to count
        if not ok.any():
            raise ValueError(f"{task_name}: no target word lies within the model's max_length")
        Z = method.transform(X[ok])
        out = np.full((len(X), Z.shape[1]), np.nan, np.float32)
        out[ok] = Z
        return out

    def token_vectors(self, texts: Sequence[str], task_name: str | None) -> np.ndarray:
        """Post-processed token vectors of ``texts`` (special tokens excluded), all rows stacked."""
        method = self.fitted_method(task_name, "token")
        toks = [t for t in self.store.tokens(texts) if len(t)]
        return method.transform(np.concatenate(toks, axis=0)).astype(np.float32)


class VariantEncoder(_Variant, AbsEncoder):
    """One post-processing variant of a base encoder, as an mteb encoder.

    Example:
        >>> enc = VariantEncoder(store, "whiten")                          # doctest: +SKIP
        >>> mteb.evaluate(enc, mteb.get_task("STSBenchmark"))              # doctest: +SKIP
    """

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:
        texts = [t for batch in inputs for t in batch["text"]]
        return self.vectors(texts, task_metadata.name)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        return cos_sim(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        return pairwise_cos_sim(embeddings1, embeddings2)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _learned_summary(method: Method) -> dict[str, Any]:
    """Small learned facts worth citing (e.g. the clipped dimensions); never large arrays."""
    out = {}
    for key, value in vars(method).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(value, (int, float, str, bool, np.integer, np.floating)):
            out[key] = _jsonable(value)
        elif isinstance(value, (list, tuple)) and len(value) <= 64 and all(
            isinstance(v, (int, np.integer)) for v in value
        ):
            out[key] = [int(v) for v in value]
    return out
