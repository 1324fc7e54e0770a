"""The one place that names the concrete backbones: :func:`load_backbone` builds the backbone of a model and
:func:`peek_revision` says which revision it will record without loading it. Everything else types against
:class:`iso_bench.vectors.base.BackboneProtocol`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from iso_bench.files import folder_revision
from iso_bench.vectors.base import EQUAL_LENGTH
from iso_bench.vectors.hf_backbone import Backbone, Extraction, default_extraction
from iso_bench.vectors.mteb_backbone import MtebBackbone, mteb_meta


def load_backbone(model_id: str, revision: str | None = None, *, device: str | None = None,
                  pooling: str | None = None, layer: int | None = None, trust_remote_code: bool = False,
                  batch_size: int = 32, hidden_states: bool = False, batching: str = EQUAL_LENGTH) -> Any:
    """The backbone that makes a model's raw vectors, the one factory the runner and the mteb loader call.

    A model that mteb's registry implements (and that is not an iso-bench variant) is run by that
    implementation, :class:`~iso_bench.vectors.mteb_backbone.MtebBackbone`, unless ``pooling`` or ``layer`` asks
    for iso-bench's own extraction; every other model by :class:`Backbone`, with its sentence-transformers
    configuration (pooling, normalisation, max length) and at mteb's pinned revision when mteb lists one.
    ``hidden_states=True`` (an analysis over every layer, :func:`iso_bench.numerics.outliers.analyse`) always gives
    :class:`Backbone`. ``describe()["vectors"]`` says which path made the vectors (``"mteb"`` or ``"hf"``).
    ``batching`` is the batching policy (:func:`iso_bench.vectors.base.plan_batches`), recorded in the
    extraction: equal token lengths per batch, so that a text's vector does not depend on its batch.

    Example:
        >>> bb = load_backbone("sentence-transformers/all-MiniLM-L6-v2")        # doctest: +SKIP
        >>> bb.describe()["vectors"]                                          # doctest: +SKIP
        'mteb'
    """
    if pooling is None and layer is None and not hidden_states:
        if mteb_meta(model_id, revision) is not None:
            return MtebBackbone(model_id, revision, device=device, trust_remote_code=trust_remote_code,
                                batch_size=batch_size, batching=batching)
    if revision is None and not Path(model_id).is_dir():
        from mteb.models.model_implementations import MODEL_REGISTRY  # lazily: mteb takes seconds to import

        base = MODEL_REGISTRY.get(model_id)
        revision = base.revision if base is not None else None
    extraction = replace(default_extraction(model_id, revision), batching=batching)
    if pooling is not None or layer is not None:
        extraction = Extraction(
            pooling=pooling or extraction.pooling,
            layer=layer if layer is not None else extraction.layer,
            normalize=extraction.normalize if pooling is None else False,
            max_length=extraction.max_length,
            batching=batching,
        )
    backbone = Backbone(model_id, revision, device=device, extraction=extraction, trust_remote_code=trust_remote_code)
    backbone.batch_size = batch_size
    return backbone


def peek_revision(model: str, revision: str | None = None, *, pooling: str | None = None, layer: int | None = None,
                  trust_remote_code: bool = False) -> str | None:
    """The revision the backbone will record, where it is known without loading the model: mteb's pinned
    revision of a model mteb runs, a local folder's checksum, the commit of the cached config; else None."""
    folder = Path(model)
    if folder.is_dir():
        return folder_revision(folder)
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
