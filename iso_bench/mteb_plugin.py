"""Register iso-bench's variants with mteb's model registry.

Each (base model, method) pair is a model of its own, named ``<base model id>+<method spec>``, e.g.
``sentence-transformers/all-MiniLM-L6-v2+whiten``. ``import iso_bench`` registers the variants of the
models in :data:`KNOWN_MODELS` with the :data:`DEFAULT_METHODS` as soon as mteb's registry is loaded;
:func:`register_model` adds any other encoder.

Example:
    >>> import iso_bench, mteb                                                       # doctest: +SKIP
    >>> model = mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten")      # doctest: +SKIP
    >>> mteb.evaluate(model, mteb.get_task("STSBenchmark"))                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

SEPARATOR = "+"
KNOWN_MODELS = (
    "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-mpnet-base-v2",
    "google-bert/bert-base-uncased",
    "FacebookAI/roberta-base",
)
DEFAULT_METHODS = ("raw", "center", "clip", "abtt", "whiten", "whiten-256", "cluster-pca", "flow")


def variant_name(model_id: str, method_spec: str) -> str:
    """The mteb model name of a variant. mteb needs ``organization/name``."""
    if "/" not in model_id:
        raise ValueError(
            f"model id {model_id!r} has no organization; mteb names models 'organization/name' "
            f"(e.g. google-bert/bert-base-uncased for bert-base-uncased): pass the full hub id or a local folder"
        )
    return f"{model_id}{SEPARATOR}{method_spec}"


def split_variant_name(name: str) -> tuple[str, str]:
    """``"org/model+whiten-256"`` -> ``("org/model", "whiten-256")``."""
    base, sep, spec = name.rpartition(SEPARATOR)
    if not sep:
        raise ValueError(f"{name!r} is not an iso-bench variant name (expected '<model>{SEPARATOR}<method>')")
    return base, spec


def load_variant(name: str, revision: str | None = None, *, base_model: str, method: str,
                 device: str | None = None, fit_corpus: str = "task", seed: int = 0,
                 data_dir: str | None = None, cache_dir: str | None = None, batch_size: int = 32,
                 **_: Any) -> Any:
    """mteb loader: build the backbone, its raw-vector cache and the variant encoder."""
    from iso_bench.backbone import Backbone
    from iso_bench.cache import EmbeddingStore, default_cache_dir
    from iso_bench.encoder import VariantEncoder
    from iso_bench.methods import make_method

    _, level = make_method(method)
    backbone = Backbone(base_model, revision, device=device)
    kinds = ("sentence", "tokens") if level == "token" else ("sentence",)
    store = EmbeddingStore(backbone, cache_dir or default_cache_dir(), kinds=kinds, batch_size=batch_size)
    return VariantEncoder(store, method, fit_corpus=fit_corpus, seed=seed, data_dir=data_dir)


def variant_meta(model_id: str, method_spec: str, *, revision: str | None = None,
                 embed_dim: int | None = None, **loader_kwargs: Any) -> Any:
    """The mteb ``ModelMeta`` of one variant, derived from the base model's when mteb knows it."""
    from mteb.models.model_implementations import MODEL_REGISTRY
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    from iso_bench.methods import make_method

    method, _level = make_method(method_spec)
    base = MODEL_REGISTRY.get(model_id)
    base_fields: dict[str, Any] = {}
    if base is not None and SEPARATOR not in (base.name or ""):
        base_fields = {k: getattr(base, k) for k in (
            "release_date", "languages", "n_parameters", "memory_usage_mb", "max_tokens", "license",
            "open_weights", "public_training_code", "public_training_data", "training_datasets",
            "reference", "citation")}
        revision = revision or base.revision
        if embed_dim is None and isinstance(base.embed_dim, int):
            embed_dim = base.embed_dim
    if embed_dim is not None:
        embed_dim = method.output_dim(embed_dim)
    kwargs = {"base_model": model_id, "method": method_spec, **loader_kwargs}
    meta = ModelMeta.create_empty({
        **base_fields,
        "name": variant_name(model_id, method_spec),
        "revision": revision,
        "loader": partial(load_variant),
        "loader_kwargs": kwargs,
        "embed_dim": embed_dim,
        "framework": ["PyTorch"],
        "similarity_fn_name": ScoringFunction.COSINE,
        "use_instructions": False,
        "adapted_from": model_id,
        "modalities": ["text"],
    })
    return ModelMeta.model_validate(meta.model_dump())


def register_model(model_id: str, methods: Iterable[str] = DEFAULT_METHODS, *, revision: str | None = None,
                   replace: bool = False, **loader_kwargs: Any) -> list[str]:
    """Register the variants of ``model_id`` with mteb; returns their names.

    A name that is already registered is kept unless ``replace`` is true.
    """
    from mteb.models.model_implementations import MODEL_REGISTRY

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


def register_tasks() -> None:
    """Add iso-bench's tasks to mteb's task registry, so that ``mteb.get_task("WiC")`` and mteb's result
    tools know them."""
    import sys

    kinds = sys.modules.get("iso_bench.kinds")
    if kinds is not None and not hasattr(kinds, "load_all"):
        return  # iso_bench.kinds is importing mteb right now; it registers the tasks when it is done
    from iso_bench.kinds import TASKS, load_all

    load_all()
    module = sys.modules["mteb.get_tasks"]
    for name in TASKS:
        cls = TASKS.get(name)
        if name not in module._TASKS_REGISTRY:
            module._TASKS_REGISTRY[name] = cls
            module.TASK_LIST = (*module.TASK_LIST, cls)
