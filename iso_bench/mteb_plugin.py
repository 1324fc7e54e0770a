"""Where iso-bench enters mteb: its variants in mteb's model registry, its tasks in mteb's task registry, and
the result hook through which every result of a variant is written with its provenance (and, through
:mod:`iso_bench.results.instances`, its per-instance units).

Each (base model, method) pair is a model of its own, named ``<base model id>+<method spec>``, e.g.
``sentence-transformers/all-MiniLM-L6-v2+whiten``. ``import iso_bench`` registers the variants of the
models in :data:`KNOWN_MODELS` with the :data:`DEFAULT_METHODS` as soon as mteb's registry is loaded;
:func:`register_model` adds any other encoder. Every task card of a kind other than ``mteb`` becomes an
mteb task class (:func:`task_class`: the kind's evaluator mixed into mteb's ``AbsTask``), registered when
mteb's task registry is loaded. mteb itself is imported only inside functions.

Example:
    >>> import iso_bench, mteb                                                       # doctest: +SKIP
    >>> model = mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten")      # doctest: +SKIP
    >>> mteb.evaluate(model, mteb.get_task("STSBenchmark"))                          # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import model_label
from iso_bench.backbones.loader import extraction_dtype, load_backbone, run_dtype
from iso_bench.checks import check_methods, describe_model
from iso_bench.data.fit_corpus import FIT_BUDGET, SETTINGS, read_text_file
from iso_bench.data.fit_corpus import fit_budget as default_budget
from iso_bench.data.provider import CorpusProvider
from iso_bench.files import texts_digest
from iso_bench.kinds import kind_class
from iso_bench.kinds.cards import cards, held_out_sources
from iso_bench.methods import make_method
from iso_bench.registry import IsoBenchError
from iso_bench.results.benchmark import DEFAULT_METHODS, NAME, V1, V2, VERSIONS, bibtex, definition, definition_sha256
from iso_bench.results.instances import encoder_of, install_capture, keep_units, track, tracked, write_instances  # noqa: F401 - named here too
from iso_bench.results.result_files import (  # noqa: F401 - the repairs a run makes before each variant, named here too
    INSTANCES_SUFFIX,
    NonFiniteScore,
    ResultsNotWritten,
    ensure_model_meta,
    nonfinite_main_scores,
    result_identity,
    result_path,
    set_aside_garbled,
    sign_scores,
    write_result,
)
from iso_bench.results.setups import FILE_DIGEST
from iso_bench.vectors.store import EmbeddingStore, default_cache_dir

SEPARATOR = "+"
MODEL_POOLING = "model"  # the setup of a token-level variant: pooled by the model's own pooling and head
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
KNOWN_MODELS = (
    "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-mpnet-base-v2",
    "google-bert/bert-base-uncased",
    "FacebookAI/roberta-base",
)


class VariantNameError(IsoBenchError, ValueError):
    """A model id or variant name that mteb cannot use; the message says what form it needs."""


def variant_name(model_id: str, method_spec: str) -> str:
    """The mteb model name of a variant. mteb needs ``organization/name``; a local folder is named
    ``local/<folder name>`` (:func:`iso_bench.backbones.base.model_label`), never by its path."""
    model_id = model_label(model_id)
    if "/" not in model_id:
        raise VariantNameError(
            f"model id {model_id!r} has no organization; mteb names models 'organization/name' "
            f"(e.g. google-bert/bert-base-uncased for bert-base-uncased): pass the full hub id or a local folder"
        )
    return f"{model_id}{SEPARATOR}{method_spec}"


def split_variant_name(name: str) -> tuple[str, str]:
    """``"org/model+whiten-256"`` -> ``("org/model", "whiten-256")``."""
    base, sep, spec = name.rpartition(SEPARATOR)
    if not sep:
        raise VariantNameError(f"{name!r} is not an iso-bench variant name (expected '<model>{SEPARATOR}<method>')")
    return base, spec


def setup_kwargs(method_spec: str, *, fit_corpus: str = "task", seed: int = 0, pooling: str | None = None,
                 layer: int | None = None, fit_sample: int | None = None,
                 fit_budget: int | None = None, dtype: str | None = None) -> dict[str, Any]:
    """The setup of a variant that is not in its name, as mteb ``experiment_kwargs``: results of different
    setups live in different folders (``<model>/<revision>/experiments/<setup>/``) and never replace each other.

    What defines the numbers, never the route the data took (a mirror and the hub give one setup; see
    :mod:`iso_bench.results.setups`): ``fit_corpus`` (fitted methods: ``task``, ``train``, or a file by its name,
    with ``fit_corpus_sha256``, the first 12 hex digits of the SHA-256 of its texts, beside it), ``fit_sample``
    (a sampled fit corpus), ``fit_budget`` (a method that does not stream, under a fit budget other than the
    default: it fits on a sample of a larger corpus, so the budget changes its numbers), ``seed`` (methods with
    randomness, and a sampled fit corpus), ``pooling`` and ``layer`` (when given), ``dtype`` (the precision of
    iso-bench's own extraction, when not float32: :func:`iso_bench.backbones.loader.run_dtype`), ``token_pooling``
(token-level methods: ``"model"``, the token vectors the model's pooling reads transformed, then its own pooling
and head; results of iso-bench before it, which pooled the text's own tokens by their mean, lack it).

    >>> setup_kwargs("whiten"), setup_kwargs("flow", seed=3), setup_kwargs("raw", layer=6)
    ({'fit_corpus': 'task'}, {'fit_corpus': 'task', 'seed': 3}, {'layer': 6})
    """
    method, level = make_method(method_spec)
    out: dict[str, Any] = {}
    if level == "token":  # transformed before the model's own pooling and head: never a result of the old path
        out["token_pooling"] = MODEL_POOLING
    if type(method).fitted:
        out["fit_corpus"] = fit_corpus
        if fit_corpus not in SETTINGS:
            out["fit_corpus"] = Path(fit_corpus).name
            out[FILE_DIGEST] = texts_digest(dict.fromkeys(read_text_file(fit_corpus)))[:12]
        if fit_sample is not None:
            out["fit_sample"] = fit_sample
        budget = default_budget() if fit_budget is None else int(fit_budget)
        if budget != FIT_BUDGET and not method.streaming():
            out["fit_budget"] = budget
    if "seed" in method.param_defaults() or fit_sample is not None and type(method).fitted or "fit_budget" in out:
        out["seed"] = seed  # it seeds the method, or the sample of the fit corpus
    if pooling is not None:
        out["pooling"] = pooling
    if layer is not None:
        out["layer"] = layer
    if dtype is not None:
        out["dtype"] = dtype
    return out


def load_variant(name: str, revision: str | None = None, *, base_model: str, method: str,
                 device: str | None = None, fit_corpus: str = "task", fit_corpus_path: str | None = None,
                 fit_sample: int | None = None, seed: int = 0, pooling: str | None = None, layer: int | None = None,
                 data_dir: str | None = None, cache_dir: str | None = None, batch_size: int = 32,
                 fit_budget: int | None = None, dtype: str | None = None, **_: Any) -> Any:
    """mteb loader: build the backbone, its raw-vector cache and the variant encoder. The variant's fit
    corpus provider loads the task being evaluated itself (from ``data_dir`` when it holds the data)."""
    from iso_bench.encoder import VariantEncoder, base_record  # lazily: the encoder imports mteb
    model = describe_model(base_model, revision, pooling=pooling, layer=layer)  # what it is, read once
    [(_, level)] = check_methods([method], model.dims(), base_model, no_tokens=model.no_tokens)  # before loading
    backbone = load_backbone(base_model, revision, device=device, pooling=pooling, layer=layer, batch_size=batch_size,
                             dtype=dtype)
    kinds = ("sentence", "tokens", "pool") if level == "token" else ("sentence",)
    store = EmbeddingStore(backbone, cache_dir or default_cache_dir(), kinds=kinds, batch_size=batch_size)
    corpus = CorpusProvider(fit_corpus_path or fit_corpus, data_dir=data_dir, sample=fit_sample, seed=seed,
                            budget=fit_budget, held_out_sources=held_out_sources())
    encoder = VariantEncoder(store, method, corpus=corpus, seed=seed)  # its fit budget: the provider's
    encoder.base_record = base_record(backbone)
    # the setup its results are filed under, whatever other keyword arguments (data_dir, cache_dir, device)
    # mteb.get_model adds to the experiment kwargs: a route or a cache folder never makes another setup
    encoder.setup = setup_kwargs(method, fit_corpus=fit_corpus_path or fit_corpus, seed=seed, pooling=pooling,
                                 layer=layer, fit_sample=fit_sample, fit_budget=fit_budget,
                                 dtype=extraction_dtype(model, dtype))
    return encoder


def variant_meta(model_id: str, method_spec: str, *, revision: str | None = None, embed_dim: int | None = None,
                 experiment: dict[str, Any] | None = None, **loader_kwargs: Any) -> Any:
    """The mteb ``ModelMeta`` of one variant, derived from the base model's when mteb knows it; ``experiment``
    is its setup (:func:`setup_kwargs`; by default that of ``loader_kwargs``)."""
    from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import
    from mteb.models.model_meta import ModelMeta, ScoringFunction  # lazily: mteb takes seconds to import

    method, level = make_method(method_spec)
    base = MODEL_REGISTRY.get(model_id)
    base_fields: dict[str, Any] = {}
    if base is not None and SEPARATOR not in (base.name or ""):
        base_fields = {k: getattr(base, k) for k in (
            "release_date", "languages", "n_parameters", "memory_usage_mb", "max_tokens", "license",
            "open_weights", "public_training_code", "public_training_data", "training_datasets",
            "reference", "citation", "similarity_fn_name")}
        revision = revision or base.revision
        if embed_dim is None and isinstance(base.embed_dim, int):  # a run passes the model's true width
            embed_dim = base.embed_dim
    if embed_dim is not None and level != "token":  # a token-level variant goes through the model's pooling
        embed_dim = method.output_dim(embed_dim)
    kwargs = {"base_model": model_id, "method": method_spec, **loader_kwargs}
    if experiment is None:
        own = {k: loader_kwargs.get(k) for k in ("dtype", "pooling", "layer")}
        # mteb's own models are registered while mteb imports: their route is not asked then (they have no dtype)
        asked = Path(model_id).is_dir() or own["pooling"] is not None or own["layer"] is not None or own["dtype"] \
            not in (None, "auto")
        dtype = run_dtype(model_id, revision, **own) if asked else None
        experiment = setup_kwargs(method_spec, **{k: v for k, v in loader_kwargs.items() if k in _SETUP}, dtype=dtype)
    meta = ModelMeta.create_empty({
        **base_fields,
        "name": variant_name(model_id, method_spec),
        "revision": revision,
        "loader": partial(load_variant),
        "loader_kwargs": kwargs,
        "embed_dim": embed_dim,
        "framework": ["PyTorch"],
        "similarity_fn_name": base_fields.pop("similarity_fn_name", None) or ScoringFunction.COSINE,
        "use_instructions": False,
        "adapted_from": model_id,
        "modalities": ["text"],
        "experiment_kwargs": experiment or None,
    })
    return ModelMeta.model_validate(meta.model_dump())


_SETUP = ("fit_corpus", "seed", "pooling", "layer", "fit_sample", "fit_budget")


def register_model(model_id: str, methods: Iterable[str] = DEFAULT_METHODS, *, revision: str | None = None,
                   replace: bool = False, **loader_kwargs: Any) -> list[str]:
    """Register the variants of ``model_id`` with mteb; returns their names.

    A name that is already registered is kept unless ``replace`` is true.
    """
    from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import

    names = []
    for spec in methods:
        meta = variant_meta(model_id, spec, revision=revision, **loader_kwargs)
        if replace or meta.name not in MODEL_REGISTRY:
            MODEL_REGISTRY[meta.name] = meta
        names.append(meta.name)
    return names


def register_known() -> None:
    """Register the default variants of every model in :data:`KNOWN_MODELS`."""
    for model_id in KNOWN_MODELS:
        register_model(model_id)


# ---- provenance on mteb's own path ------------------------------------------------------------------

def install_result_hook() -> None:
    """Wrap mteb's ``ResultCache.save_to_cache`` (through which ``mteb.evaluate`` writes every result) so
    that a result of an iso-bench variant carries its ``iso_bench`` record in each score entry, with the
    digest of the entry's scores, record and identity (:func:`sign_scores`): the same provenance whether
    ``iso-bench run`` or
    ``mteb.evaluate`` wrote it. The per-instance units captured during the evaluation
    (:func:`iso_bench.results.instances.install_capture`, installed here too) are written first, beside the result
    (:func:`iso_bench.results.instances.write_instances`), and each entry's record names them and holds its bootstrap
    interval. A variant's files are written by :func:`write_result`, each one whole or not at all; the
    results of other models go through mteb's own code unchanged. A variant's result whose main score is not a
    finite number is not written: :class:`NonFiniteScore` is raised (``mteb.evaluate``), or, under
    ``iso-bench run``, kept in the encoder's ``refused`` (task -> error) for the runner to report as that
    cell's failure. Idempotent."""
    from mteb.cache import ResultCache  # lazily: mteb takes seconds to import

    install_capture()
    original = ResultCache.save_to_cache
    if getattr(original, "iso_bench_hook", False):
        return

    def save_to_cache(self: Any, task_result: Any, model_name: Any, model_revision: str | None = None,
                      **kwargs: Any) -> None:
        encoder = encoder_of(model_name)
        if encoder is None:
            return original(self, task_result, model_name, model_revision, **kwargs)
        bad = nonfinite_main_scores(task_result)
        if bad:  # never written, so never counted as done
            refusal = NonFiniteScore(model_name.name, task_result.task_name, bad)
            refused = getattr(encoder, "refused", None)
            if refused is None:  # mteb's own path: mteb.evaluate reports it
                raise refusal
            refused[task_result.task_name] = refusal
            return None
        record = encoder.provenance(task_result.task_name)
        where = result_path(self, task_result.task_name, model_name)
        units_file = where.with_name(task_result.task_name + INSTANCES_SUFFIX)  # as write_instances names it
        fresh = not where.exists() and not units_file.exists()
        try:
            units = write_instances(self, task_result, model_name, encoder, record.get("task_type"))
            sign_scores(task_result, record, units, result_identity(self, task_result.task_name, model_name))
            write_result(self, task_result, model_name, kwargs.get("encode_kwargs"))
        except OSError as exc:  # a full or read-only results disk
            if fresh:  # the units written for a result that is not: never left without their result
                with suppress(OSError):
                    units_file.unlink(missing_ok=True)
            error = exc if isinstance(exc, ResultsNotWritten) else ResultsNotWritten(where, exc)
            failed = getattr(encoder, "write_errors", None)
            if failed is None:  # mteb's own path: mteb.evaluate reports it
                raise error from exc
            failed.append(error)  # iso-bench run: the runner stops after this evaluation and says what exists
        return None

    save_to_cache.iso_bench_hook = True  # type: ignore[attr-defined]
    ResultCache.save_to_cache = save_to_cache


# ---- tasks ------------------------------------------------------------------------------------------


def task_metadata(card: Any) -> Any:
    """mteb's ``TaskMetadata`` of an iso-bench task card, with the fields every such task shares filled in."""
    from mteb.abstasks.task_metadata import TaskMetadata  # lazily: mteb takes seconds to import

    meta = dict(card.metadata)
    version = meta.pop("version", None) or (card.source.version if card.source else "1")
    return TaskMetadata(
        name=card.name,
        description=meta.pop("description"),
        reference=meta.pop("reference"),
        dataset={"path": f"iso-bench/{card.name}", "revision": version},
        type=meta.pop("type"),
        category="t2t",
        modalities=["text"],
        eval_splits=list(card.splits),
        eval_langs=["eng-Latn"],
        main_score=meta.pop("main_score"),
        date=meta.pop("date", None),
        domains=list(meta.pop("domains", ())) or None,
        license=meta.pop("license", "not specified"),
        annotations_creators=meta.pop("annotations", "expert-annotated"),
        dialect=[],
        sample_creation="found",
        bibtex_citation=meta.pop("citation"),
        **meta,
    )


_TASK_CLASSES: dict[str, type] = {}


def task_class(card: Any) -> type:
    """The mteb task class of a card: its kind's evaluator, mixed into mteb's ``AbsTask`` (built once)."""
    if card.name not in _TASK_CLASSES:
        kind = kind_class(card)
        name = "".join(ch for ch in card.name.title() if ch.isalnum())
        _TASK_CLASSES[card.name] = type(name, (kind, _adapter()), {
            "card": card, "metadata": task_metadata(card), "__module__": kind.__module__,
            "__doc__": f"{card.name}: {(kind.__doc__ or '').strip()}"})
    return _TASK_CLASSES[card.name]


_ADAPTER: list[type] = []


def _adapter() -> type:
    """The part of every iso-bench task that speaks mteb's ``AbsTask`` (created on first use)."""
    if not _ADAPTER:
        from mteb.abstasks.abstask import AbsTask  # lazily: mteb takes seconds to import

        class IsoTask(AbsTask):
            """An iso-bench task: ``evaluate`` scores the model with the kind's ``score`` on the whole task and
            keeps the per-instance units the kind left (:func:`iso_bench.results.instances.keep_units`)."""

            def __init__(self, data_dir: str | Any | None = None, **kwargs: Any) -> None:
                super().__init__(**kwargs)
                self.data_dir = data_dir

            def evaluate(self, model: Any, split: str = "test", subsets_to_run: list[str] | None = None, *,
                         encode_kwargs: Any = None, **kwargs: Any) -> dict[str, dict[str, Any]]:
                self.load_data()
                self.last_units = None  # what this score call leaves (see iso_bench.kinds.base.Kind)
                scores = self.score(model, split, encode_kwargs or {})
                self._add_main_score(scores)
                keep_units(model, self.metadata.name, split, "default", self.last_units)
                return {"default": scores}

            def _evaluate_subset(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - evaluate overrides
                raise NotImplementedError

            def _calculate_descriptive_statistics_from_split(self, *args: Any, **kwargs: Any) -> Any:  # noqa: E501
                raise NotImplementedError(f"{self.metadata.name} has no descriptive statistics")

        _ADAPTER.append(IsoTask)
    return _ADAPTER[0]


def register_tasks() -> None:
    """Add every iso-bench task card (of a kind other than ``mteb``) to mteb's task registry, so that
    ``mteb.get_task("WiC")`` and mteb's result tools know them."""

    module = sys.modules["mteb.get_tasks"]
    for card in cards():
        if card.is_mteb or card.name in module._TASKS_REGISTRY:
            continue
        cls = task_class(card)
        module._TASKS_REGISTRY[card.name] = cls
        module.TASK_LIST = (*module.TASK_LIST, cls)


def register_benchmark() -> None:
    """Add ``iso-bench v3``, ``v2`` and ``v1`` to mteb's benchmarks (``mteb.get_benchmark``); called once mteb's
    benchmark module is imported. Their tasks are mteb's and iso-bench's task objects, in card order."""
    import mteb  # lazily: mteb takes seconds to import
    import mteb.benchmarks.benchmarks as module  # lazily: mteb takes seconds to import

    if isinstance(getattr(module, "ISO_BENCH_V3", None), mteb.Benchmark):
        return
    about = {NAME: "isotropy post-processing of sentence encoders, alone and with int8, binary and dimension-cut "
                   "storage, compared on MTEB's STS tasks, the papers' STS protocol, WiC, WSD, "
                   "Banking77Classification and SciFact (ranked), with isotropy diagnostics (unranked); every fitted "
                   "method fitted on the evaluated task's texts and on held-out texts; token-level variants pooled "
                   "by the model's own pooling.",
             V2: "isotropy post-processing of sentence encoders compared on MTEB's STS tasks, the papers' STS "
                 "protocol, WiC, WSD, Banking77Classification and SciFact (ranked), with isotropy diagnostics "
                 "(unranked); every fitted method fitted on the evaluated task's texts and on held-out texts.",
             V1: "isotropy post-processing of sentence encoders compared on MTEB's STS tasks, the papers' STS "
                 "protocol, WiC and WSD (ranked), with isotropy diagnostics (unranked); every fitted method fits "
                 "on the evaluated task's texts."}
    for name in VERSIONS:
        attribute = "ISO_BENCH_" + name.rsplit(" ", 1)[-1].upper()
        names = [t["task"] for t in definition(name)["tasks"]]
        setattr(module, attribute, mteb.Benchmark(
            name=name, tasks=mteb.get_tasks(tasks=names),
            description=f"{name}: {about[name]} Definition SHA-256 {definition_sha256(name)}.",
            citation=bibtex(name)))
    lookup = importlib.import_module("mteb.benchmarks.get_benchmark")  # the module (its function shadows it)
    for cached in ("_build_registry", "_build_aliases_registry"):  # registries built before this, built again
        clear = getattr(getattr(lookup, cached, None), "cache_clear", None)
        if clear is not None:
            clear()
