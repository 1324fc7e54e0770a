"""A request's texts tokenized once, batches collated from their per-text features, outputs brought to the host
once per batch.

:class:`Tokens` holds what one tokenizer call over a whole request gives, unpadded and in input order: the model's
inputs per text, their lengths, and (where token vectors are asked) their character offsets and special-token
masks from the same call. :func:`collate` makes a batch's tensors from it without tokenizing again: an
equal-length batch needs no padding (its tensors are those the pipeline's own preprocessing gives the same
texts); a padded batch is padded by the tokenizer's own ``pad``. Importing this module loads neither torch nor
transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SKIP = ("offset_mapping", "special_tokens_mask")  # what the call gives for the token vectors, not the model


@dataclass
class Tokens:
    """``columns``: per model input, one list per text; ``shared``: what a whole batch carries (the pipeline's
    ``modality``, ``prompt_length``); ``offsets`` and ``special``: per text, its tokens' character offsets and
    special-token mask (None where not asked)."""

    columns: dict[str, list[Any]]
    lengths: list[int]
    shared: dict[str, Any] = field(default_factory=dict)
    offsets: list[Any] | None = None
    special: list[Any] | None = None

    def offsets_of(self, i: int) -> np.ndarray | None:
        return None if self.offsets is None else np.asarray(self.offsets[i], dtype=np.int64).reshape(-1, 2)

    def real_of(self, i: int, prompt: str) -> np.ndarray:
        """The mask of text ``i``'s own tokens: not special, not in the prompt (its offsets are asked for then)."""
        real = (~np.asarray(self.special[i], dtype=bool) if self.special is not None
                else np.ones(self.lengths[i], dtype=bool))
        return real & (self.offsets_of(i)[:, 1] > len(prompt)) if prompt else real


def from_encoding(encoding: Any, n: int, shared: dict[str, Any] | None = None) -> Tokens:
    """:class:`Tokens` of a tokenizer's unpadded output (a ``BatchEncoding`` of lists) for ``n`` texts."""
    columns = {k: v for k, v in encoding.items() if k not in SKIP and isinstance(v, list) and len(v) == n}
    rest = {k: v for k, v in encoding.items() if k not in SKIP and k not in columns}
    return Tokens(columns, [len(ids) for ids in columns["input_ids"]], {**rest, **(shared or {})},
                  encoding.get("offset_mapping"), encoding.get("special_tokens_mask"))


def pipeline_tokens(st: Any, texts: Sequence[str], prompt: str, task: str | None, rows: bool,
                    offsets: bool | None = None) -> Tokens:
    """One tokenizer call over the whole request with the arguments the sentence-transformers pipeline's own
    preprocessing passes its tokenizer (the prompt put before each text, truncation, its max length and
    processing settings), unpadded; for token vectors (``rows``) the special-token masks from the same call,
    and the character offsets where spans or a prompt need them (``offsets``; default: with ``rows`` and a
    prompt); the pipeline's ``preprocess`` itself where those arguments cannot be read (another
    sentence-transformers)."""
    first = st[0]
    text: dict[str, Any] = {"padding": False}
    if rows:
        text.update(return_special_tokens_mask=True)
    if offsets or (offsets is None and rows and bool(prompt)):
        text.update(return_offsets_mapping=True)
    merge = getattr(first, "_merge_processing_kwargs", None)
    measure = getattr(first, "_get_prompt_length", None)
    if merge is None or measure is None:
        extra = {"task": task} if task else {}
        encoding = st.preprocess(list(texts), prompt=prompt or None,
                                 processing_kwargs={"text": text, "common": {"return_tensors": None}}, **extra)
        return from_encoding(encoding, len(texts))
    own = merge(None)  # the module's processing settings, as its preprocess merges them
    kwargs = {"truncation": "longest_first", **own.get("text", {}), **own.get("common", {}), **text,
              "return_tensors": None}
    shared: dict[str, Any] = {"modality": "text"}
    if prompt:
        shared["prompt_length"] = measure(prompt)
    encoding = first.tokenizer([prompt + t for t in texts] if prompt else list(texts), **kwargs)
    return from_encoding(encoding, len(texts), shared)


def static_tokens(module: Any, texts: Sequence[str], prompt: str, offsets: bool = True) -> Tokens:
    """One call of a static embedding's tokenizer over the whole request, as its ``preprocess`` makes it (the
    prompt put before each text, no special tokens): ids per text, and their character offsets (``offsets``)."""
    encodings = module.tokenizer.encode_batch([prompt + t for t in texts], add_special_tokens=False)
    ids = [e.ids for e in encodings]
    return Tokens({"input_ids": ids}, [len(i) for i in ids], offsets=[e.offsets for e in encodings] if offsets
                  else None)


def collate(tokens: Tokens, run: Sequence[int], pad: Any = None) -> dict[str, Any]:
    """The model inputs of the texts ``run`` as tensors: stacked where they have one length, else padded by
    ``pad`` (the tokenizer's ``pad``), plus what the whole batch carries."""
    import torch  # lazily: torch takes seconds to import

    if len({tokens.lengths[i] for i in run}) > 1:
        if pad is None:
            raise ValueError("texts of several lengths in one batch need the tokenizer's pad")
        out = dict(pad({k: [v[i] for i in run] for k, v in tokens.columns.items()}, padding=True, return_tensors="pt"))
    else:
        out = {k: torch.tensor([v[i] for i in run], dtype=torch.long) for k, v in tokens.columns.items()}
    return {**out, **tokens.shared}


def static_collate(tokens: Tokens, run: Sequence[int]) -> dict[str, Any]:
    """A static embedding's inputs for the texts ``run``, as its ``preprocess`` makes them: every token id in
    one flat tensor and each text's start in it."""
    import torch  # lazily: torch takes seconds to import

    ids = [tokens.columns["input_ids"][i] for i in run]
    offsets = torch.from_numpy(np.cumsum([0] + [len(t) for t in ids[:-1]]))
    return {"input_ids": torch.tensor([t for row in ids for t in row], dtype=torch.long), "offsets": offsets}


def to_device(features: dict[str, Any], device: Any) -> dict[str, Any]:
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def to_host(tensors: Sequence[Any]) -> list[np.ndarray]:
    """The float32 numpy arrays of ``tensors``: on an accelerator in one device-to-host copy (flattened and
    concatenated there), on the CPU without a copy."""
    import torch  # lazily: torch takes seconds to import

    tensors = [t.detach().float() for t in tensors]
    if all(t.device.type == "cpu" for t in tensors):
        return [t.numpy() for t in tensors]
    flat = (torch.cat([t.reshape(-1) for t in tensors]) if len(tensors) > 1 else tensors[0].reshape(-1)).cpu().numpy()
    bounds = np.cumsum([0, *(t.numel() for t in tensors)])
    return [flat[a:b].reshape(t.shape) for a, b, t in zip(bounds[:-1], bounds[1:], tensors, strict=True)]


def direct(st: Any) -> str | None:
    """How iso-bench feeds a sentence-transformers pipeline itself: ``"static"`` (a static embedding first),
    ``"transformer"`` (a text Transformer module with a tokenizer, no router, no per-task lengths, no chat
    template or packed inputs), or None: then the pipeline's own ``encode`` runs each batch."""
    from transformers import PreTrainedTokenizerBase  # lazily: transformers loads torch

    first = st[0] if len(st) else None
    if type(first).__name__ == "StaticEmbedding":
        return "static"
    if type(first).__name__ != "Transformer" or not isinstance(getattr(first, "tokenizer", None),
                                                                  PreTrainedTokenizerBase):
        return None
    if any(type(m).__name__ == "Router" for m in st.modules()) or any(
            getattr(m, a, None) is not None for m in st.modules()
            for a in ("query_length", "document_length", "query_expansion")):
        return None
    if "message" in (getattr(first, "modality_config", None) or {}) or getattr(first, "can_flatten_inputs", False):
        return None
    if getattr(first, "transformer_task", None) in ("text-generation", "any-to-any"):
        return None
    return "transformer"
