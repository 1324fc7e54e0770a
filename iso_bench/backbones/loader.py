"""The one place that names the concrete backbones: :func:`resolve` says once what a model is (:class:`Resolved`:
how it is run, where its files are, which revision), :func:`load_backbone` builds its backbone from that and
:func:`peek_revision` says which revision it will record without loading it. Everything else types against
:class:`iso_bench.backbones.base.BackboneProtocol`.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import EQUAL_LENGTH, BackboneError, check_tokenizer, model_label, read_model_json
from iso_bench.backbones.hf_backbone import Backbone, Extraction, default_extraction, unreplayable
from iso_bench.backbones.model_files import read_files, revision_commit
from iso_bench.backbones.mteb_backbone import MtebBackbone, mteb_meta
from iso_bench.backbones.precision import AUTO, PrecisionError, chosen_dtype
from iso_bench.files import MANIFEST, folder_revision, verify_manifest

MTEB, PIPELINE, HF = "mteb", "pipeline", "hf"
"""How a model is run: mteb's implementation of it; its sentence-transformers pipeline (a ``modules.json``) that
mteb does not list; iso-bench's own extraction from the hidden states (a ``pooling``, a ``layer``, an analysis of
every layer, or a model that is neither)."""


@dataclass(frozen=True)
class Resolved:
    """What a model is, read once: ``how`` it is run (:data:`MTEB`, :data:`PIPELINE`, :data:`HF`), whether it is a
    local ``folder``, the ``revision`` it is loaded at (mteb's pinned one for a model mteb lists), mteb's
    ``meta`` (for :data:`MTEB`) and its sentence-transformers ``modules`` (``modules.json``; None without).

    And what its vectors will be, as far as known before loading: ``width`` (the sentence vectors' dimension) and
    ``token_width`` (the token vectors'), from the model's files (:mod:`iso_bench.backbones.model_files`) where
    they are at hand, else mteb's metadata (``width_from`` says which); ``declared``, mteb's ``embed_dim``;
    ``pooling``; ``dtype``, the precision its loader asks for or its ``config.json`` holds (None: float32 or
    not said); ``no_tokens``, why it gives no token vectors where that is known from mteb's loader class (None:
    it gives them, or it is known only from the loaded object: a loader function). After loading, the backbone
    measures the width and records the dtype (``describe()``)."""

    model_id: str
    how: str
    folder: bool
    revision: str | None
    meta: Any = None
    modules: Any = None
    width: int | None = None
    token_width: int | None = None
    width_from: str | None = None
    declared: int | None = None
    pooling: str | None = None
    dtype: str | None = None
    no_tokens: str | None = None

    def dims(self) -> dict[str, int]:
        """``{"sentence": d, "token": d}``, as far as known ({} when neither is)."""
        return {k: v for k, v in (("sentence", self.width), ("token", self.token_width)) if v is not None}

    def disagreement(self) -> str | None:
        """One line naming mteb's metadata where it declares another width than the model's files give."""
        if self.width_from != "files" or self.declared is None or self.declared == self.width:
            return None
        return (f"note: mteb's metadata of {self.model_id} declares embed_dim={self.declared}; its files give "
                f"{self.width}-d sentence vectors, which iso-bench uses")


def resolve(model_id: str, revision: str | None = None, *, pooling: str | None = None, layer: int | None = None,
            hidden_states: bool = False) -> Resolved:
    """What ``model_id`` is and how iso-bench runs it (see :func:`load_backbone`), without loading it."""
    folder = Path(model_id).is_dir()
    own = pooling is not None or layer is not None or hidden_states
    revision = revision_commit(model_id, revision)  # a branch or tag as its commit, before anything is decided
    if not own:
        meta = mteb_meta(model_id, revision)
        if meta is not None:
            return _described(Resolved(model_id, MTEB, folder, revision, meta))
        pinned = mteb_meta(model_id) if revision is not None else None
        if pinned is not None:  # mteb implements the model at another commit: never silently another route
            raise BackboneError(f"--revision {revision}: mteb implements {model_id!r} at revision {pinned.revision}, "
                                "not this one; leave --revision out (or give that one) for mteb's implementation, or "
                                "pass --pooling or --layer to read this revision's hidden states")
    modules = read_model_json(model_id, "modules.json", revision)
    modules = modules if isinstance(modules, list) and modules else None
    if not own and modules is not None:
        return _described(Resolved(model_id, PIPELINE, folder, revision, modules=modules))
    if revision is None and not folder:
        from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import

        base = MODEL_REGISTRY.get(model_id)
        revision = base.revision if base is not None else None
    return _described(Resolved(model_id, HF, folder, revision, modules=modules))


def _described(model: Resolved) -> Resolved:
    """``model`` with its width, pooling, precision and token vectors filled in from its files (and mteb's
    metadata where they are not at hand)."""
    meta, kwargs = model.meta, dict(getattr(model.meta, "loader_kwargs", None) or {})
    revision = model.revision or getattr(meta, "revision", None)
    modules = model.modules
    if model.how == MTEB:
        modules = read_model_json(model.model_id, "modules.json", revision)
        modules = modules if isinstance(modules, list) and modules else None
    truncate = kwargs.get("embed_dim", kwargs.get("truncate_dim")) if model.how == MTEB else None
    files = read_files(model.model_id, revision, modules if model.how != HF else None, truncate)
    declared = meta.embed_dim if meta is not None and isinstance(meta.embed_dim, int) else None
    width, width_from = (files.width, "files") if files.width is not None else (declared, "metadata")
    if width is None:
        width_from = None
    asked = (kwargs.get("model_kwargs") or {}).get("dtype", kwargs.get("dtype")) if model.how == MTEB else None
    dtype = str(getattr(asked, "value", asked)).removeprefix("torch.") if asked is not None else files.dtype
    return replace(model, width=width, token_width=files.hidden, width_from=width_from, declared=declared,
                   pooling=files.pooling, dtype=None if dtype in ("float32", "auto") else dtype,
                   no_tokens=_no_tokens(model) if model.how == MTEB else None)


def _no_tokens(model: Resolved) -> str | None:
    """Why mteb's implementation gives sentence vectors only, where its loader is a class that says so: not mteb's
    plain sentence-transformers wrapper nor its instruction wrapper (or a subclass that keeps their ``encode``).
    A loader function (``q3e_instruct_loader``) is decided from the object it returns, after loading."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel as Instruct  # lazily: mteb
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper as Plain  # lazily: mteb

    loader = getattr(model.meta, "loader", None)
    loader = getattr(loader, "func", loader)  # a functools.partial
    if loader is None or not isinstance(loader, type):
        return None
    if any(issubclass(loader, base) and loader.encode is base.encode for base in (Plain, Instruct)):
        return None
    return f"mteb runs {model.model_id} by {loader.__qualname__}, which gives sentence vectors only"


def load_backbone(model_id: str, revision: str | None = None, *, device: str | None = None,
                  pooling: str | None = None, layer: int | None = None, trust_remote_code: bool = False,
                  batch_size: int = 32, hidden_states: bool = False, batching: str = EQUAL_LENGTH,
                  dtype: str | None = None) -> Any:
    """The backbone that makes a model's raw vectors, the one factory the runner and the mteb loader call.

    A model that mteb's registry implements (and that is not an iso-bench variant) is run by that
    implementation, :class:`~iso_bench.backbones.mteb_backbone.MtebBackbone`, unless ``pooling`` or ``layer`` asks
    for iso-bench's own extraction; any other sentence-transformers pipeline (a hub id or a local folder with a
    ``modules.json``: Transformer or static embedding, pooling of any mode, Dense, Normalize) through its own
    modules (:func:`pipeline_backbone`); every other model by :class:`Backbone`, from its hidden states.
    ``hidden_states=True`` (an analysis over every layer, :func:`iso_bench.numerics.outliers.analyse`) always gives
    :class:`Backbone`. ``describe()["vectors"]`` says which path made the vectors (``"mteb"`` or ``"hf"``).
    ``batching`` is the batching policy (:func:`iso_bench.backbones.base.plan_batches`), recorded in the
    extraction: equal token lengths per batch, so that a text's vector does not depend on its batch. ``dtype`` is
    the precision of iso-bench's own extraction (:data:`iso_bench.backbones.precision.DTYPES`; None: ``auto``, the
    checkpoint's), recorded in it (:func:`extraction_dtype`); the other routes refuse one.

    Example:
        >>> bb = load_backbone("sentence-transformers/all-MiniLM-L6-v2")        # doctest: +SKIP
        >>> bb.describe()["vectors"]                                          # doctest: +SKIP
        'mteb'
    """
    model = resolve(model_id, revision, pooling=pooling, layer=layer, hidden_states=hidden_states)
    precision = extraction_dtype(model, dtype)
    if model.folder and (Path(model_id).expanduser() / MANIFEST).exists():  # an exported folder, on every route
        verify_manifest(Path(model_id).expanduser())
    if model.how == MTEB:
        return MtebBackbone(model_id, revision, device=device, trust_remote_code=trust_remote_code,
                            batch_size=batch_size, batching=batching, meta=model.meta)
    if model.how == PIPELINE:
        return pipeline_backbone(model_id, model.revision, device=device, trust_remote_code=trust_remote_code,
                                 batch_size=batch_size, batching=batching)
    revision = model.revision
    unlike = unreplayable(model_id, revision, model.modules) if layer is not None and pooling is None else None
    if unlike is not None:
        raise BackboneError(f"--layer {layer}: {model_id!r} pools its sentence vectors by {unlike} (its "
                            "sentence-transformers pipeline), which iso-bench's own pooling of a layer does not "
                            "replay; pass --pooling (mean, cls, last-token) to pool that layer as iso-bench does, or "
                            "leave --layer out to run the pipeline")
    extraction = replace(default_extraction(model_id, revision, model.modules), batching=batching, dtype=precision)
    if pooling is not None or layer is not None:
        extraction = Extraction(
            pooling=pooling or extraction.pooling,
            layer=layer if layer is not None else extraction.layer,
            normalize=extraction.normalize if pooling is None else False,
            max_length=extraction.max_length,
            batching=batching,
            dtype=precision,
        )
    backbone = Backbone(model_id, revision, device=device, extraction=extraction, trust_remote_code=trust_remote_code)
    backbone.batch_size = batch_size
    return backbone


def extraction_dtype(model: Resolved, dtype: str | None) -> str | None:
    """The precision iso-bench's own extraction of ``model`` records for ``--dtype dtype`` (None for float32;
    :func:`iso_bench.backbones.precision.chosen_dtype`): part of the cache key and of a result's setup. A model run
    by mteb's implementation or its sentence-transformers pipeline runs in its own precision: None, and a
    ``--dtype`` is refused in one line."""
    if model.how != HF:
        if dtype not in (None, AUTO):
            route = "mteb's implementation of it" if model.how == MTEB else "its sentence-transformers pipeline"
            raise PrecisionError(f"--dtype {dtype}: {model.model_id!r} is run by {route}, in its own precision; "
                                 "--dtype applies to iso-bench's own extraction (pass --pooling or --layer), or "
                                 "leave it out")
        return None
    return chosen_dtype(dtype, model.model_id, model.revision)


def run_dtype(model_id: str, revision: str | None = None, dtype: str | None = None, *, pooling: str | None = None,
              layer: int | None = None, hidden_states: bool = False) -> str | None:
    """:func:`extraction_dtype` of a model named by its id and settings, without loading it."""
    return extraction_dtype(resolve(model_id, revision, pooling=pooling, layer=layer, hidden_states=hidden_states),
                            dtype)


def peek_revision(model: str, revision: str | None = None, *, pooling: str | None = None, layer: int | None = None,
                  trust_remote_code: bool = False) -> str | None:
    """The revision the backbone will record, where it is known without loading the model: mteb's pinned
    revision of a model mteb runs, a local folder's checksum, the commit of the cached config; else None."""
    folder = Path(model)
    if folder.is_dir():
        return folder_revision(folder)
    revision = revision_commit(model, revision)
    if pooling is None and layer is None:
        meta = mteb_meta(model, revision)
        if meta is not None:
            return meta.revision
    try:
        from transformers import AutoConfig  # lazily: the command line's checks run without transformers

        if revision is None:
            from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import

            base = MODEL_REGISTRY.get(model)
            revision = base.revision if base is not None else None
        config = AutoConfig.from_pretrained(model, revision=revision, trust_remote_code=trust_remote_code)
    except Exception:  # noqa: BLE001 - not known without loading: the backbone says it
        return None
    return getattr(config, "_commit_hash", None)


def pipeline_backbone(model_id: str, revision: str | None = None, *, device: str | None = None,
                      trust_remote_code: bool = False, batch_size: int = 32, batching: str = EQUAL_LENGTH) -> Any:
    """A sentence-transformers pipeline that mteb does not list, run as mteb runs any such model (its
    ``SentenceTransformerEncoderWrapper``), so that raw vectors are the pipeline's own: every pooling mode, Dense
    layers, Normalize, static (model2vec) embeddings. A local folder is named ``local/<folder name>`` and its
    revision is the digest of its files."""
    import torch  # lazily: torch takes seconds to import
    from mteb.models.model_meta import ModelMeta  # lazily: mteb takes seconds to import
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper  # lazily: mteb
    from sentence_transformers import SentenceTransformer  # lazily: sentence-transformers loads torch

    folder = Path(model_id).expanduser()
    local = folder.is_dir()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        st = SentenceTransformer(str(folder.resolve()) if local else model_id, revision=None if local else revision,
                                 device=device, trust_remote_code=trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - whatever the pipeline's modules raise, said in one line
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackboneError(f"cannot load the sentence-transformers model {model_id!r}: {reason}. Check that the "
                            "folder holds the model as sentence-transformers saved it (modules.json and each "
                            "module's files)") from None
    check_tokenizer(getattr(st, "tokenizer", None), model_id)
    name = model_label(model_id)
    commit = getattr(getattr(st, "model_card_data", None), "base_model_revision", None)
    with warnings.catch_warnings(), _quiet("mteb.models.model_meta"):  # mteb's guess at the model's size
        warnings.simplefilter("ignore")
        wrapper = SentenceTransformerEncoderWrapper(st)
    wrapper.mteb_model_meta = ModelMeta.create_empty(overwrites={
        "name": name, "revision": folder_revision(folder) if local else (revision or commit or "unknown"),
        "loader": SentenceTransformerEncoderWrapper})
    return MtebBackbone(name, wrapper.mteb_model_meta.revision, device=device, batch_size=batch_size,
                        model=wrapper, batching=batching)


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Messages of logger ``name`` below ERROR are dropped inside the block."""
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
