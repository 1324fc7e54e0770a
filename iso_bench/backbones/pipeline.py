"""What a sentence-transformers pipeline is, as iso-bench records it: the :class:`MtebExtraction` part of every
cache folder and result record (implementation, prompts, modules, pooling, batching), and the helpers that read a
pipeline (its SentenceTransformer behind mteb's wrapper, a static embedding, its commit, numpy views of its
outputs). Importing this module loads neither torch nor mteb."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iso_bench.backbones.base import EQUAL_LENGTH


@dataclass(frozen=True)
class MtebExtraction:
    """How mteb's implementation makes the vectors; part of every cache folder and result record.

    ``prompts`` is the wrapper's prompt dictionary (task name, task type or prompt type -> prompt string).
    ``settings`` is a digest of the loader's other settings.
    """

    implementation: str
    prompts: Mapping[str, str] = field(default_factory=dict)
    pooling: str | None = None
    normalize: bool = False
    max_length: int | None = None
    token_vectors: str | None = None
    settings: str = ""
    batching: str = EQUAL_LENGTH
    modules: tuple[str, ...] = ()
    dtype: str | None = None
    instruction_template: str | None = None

    def key(self) -> str:
        """A short stable name for cache folders (prompts are part of each text's key instead); vectors of
        the equal-length policy live in a folder of their own (``padded`` and the model's own batching: the
        folders of iso-bench 0.1, whose vectors they are); a forward pass in 16-bit precision ends in its dtype."""
        norm = "-norm" if self.normalize else ""
        batching = "-equal-length" if self.batching == EQUAL_LENGTH else ""
        dtype = f"-{self.dtype}" if self.dtype else ""
        return (f"mteb-{self.pooling or 'model'}{norm}-max{self.max_length or 'na'}-{self.settings[:10]}{batching}"
                f"{dtype}")

    def to_dict(self) -> dict[str, Any]:
        """The record; ``dtype`` (float32 is its absence) and ``instruction_template`` only where there is one."""
        out = {"vectors": "mteb", "implementation": self.implementation, "prompts": dict(self.prompts),
               "pooling": self.pooling, "normalize": self.normalize, "max_length": self.max_length,
               "token_vectors": self.token_vectors, "settings_sha256": self.settings, "batching": self.batching,
               "modules": list(self.modules)}
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.instruction_template is not None:
            out["instruction_template"] = self.instruction_template
        return out


def sentence_transformer(model: Any) -> Any | None:
    """The SentenceTransformer behind an mteb implementation whose ``encode`` is mteb's plain
    sentence-transformers wrapper or its instruction wrapper (:func:`instructed`); None for any other
    implementation (its own ``encode`` may do anything)."""
    from mteb.models.sentence_transformer_wrapper import (  # lazily: mteb takes seconds to import
        SentenceTransformerEncoderWrapper,
    )
    from sentence_transformers import SentenceTransformer  # lazily: sentence-transformers loads torch

    plain = isinstance(model, SentenceTransformerEncoderWrapper) and (
        type(model).encode is SentenceTransformerEncoderWrapper.encode)
    st = getattr(model, "model", None)
    return st if (plain or instructed(model)) and isinstance(st, SentenceTransformer) else None


def instructed(model: Any) -> bool:
    """Whether ``model`` is mteb's instruction wrapper of a SentenceTransformer, ``InstructSentenceTransformerModel``,
    or a subclass that keeps its ``encode`` (decided from the loaded object, whatever loader made it: a class, or a
    function such as ``q3e_instruct_loader`` that returns one). Its ``encode`` puts the task's instruction before
    each text (``prompt=``) and calls the pipeline's plain ``encode``, which iso-bench can do itself."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel as Instruct  # lazily: mteb

    return isinstance(model, Instruct) and type(model).encode is Instruct.encode


def dtype_of(st: Any) -> str | None:
    """The dtype of the pipeline's parameters, the precision its forward pass runs in, as torch names it without
    the prefix (``"bfloat16"``); None for float32 (and for a pipeline without parameters)."""
    first = next(iter(st.parameters()), None) if st is not None else None
    name = str(first.dtype).removeprefix("torch.") if first is not None else None
    return None if name in (None, "float32") else name


def extraction_of(model: Any, st: Any, meta: Any, batching: str) -> MtebExtraction:
    implementation = f"{type(model).__module__}.{type(model).__qualname__}"
    prompts = {str(k): str(v) for k, v in (getattr(model, "model_prompts", None) or {}).items()}
    settings = {k: v for k, v in (meta.loader_kwargs or {}).items() if k not in ("model_prompts", "device")}
    modules: tuple[str, ...] = ()
    if st is not None:
        modules = tuple(module_name(m) for m in st)
        pooling = next((getattr(m, "pooling_mode", None) for m in st if type(m).__name__ == "Pooling"), None)
        normalize = any(type(m).__name__ == "Normalize" for m in st)
        max_length = st.max_seq_length or getattr(st.tokenizer, "model_max_length", None)
        tokens = "sentence-transformers token_embeddings of the same forward pass"
        if static_embedding(st) is not None:  # no forward pass: a text's vector is the mean of its tokens' rows
            pooling, max_length, tokens = "mean", None, "the static embedding's rows of the text's tokens"
    else:
        pooling, normalize, tokens = None, False, None
        max_length = int(meta.max_tokens) if meta.max_tokens else None
    finite = isinstance(max_length, int) or (isinstance(max_length, float) and math.isfinite(max_length))
    template = getattr(model, "instruction_template", None)
    template = None if template is None else template if isinstance(template, str) else stable_name(template)
    digest = settings_digest(implementation, settings, modules, getattr(st, "default_prompt_name", None), template)
    return MtebExtraction(implementation, prompts, str(pooling) if pooling else None, normalize,
                          int(max_length) if max_length and finite else None, tokens, digest, batching, modules,
                          dtype_of(st), template)


def settings_digest(implementation: str, settings: Mapping[str, Any], modules: tuple[str, ...] = (),
                    default_prompt: str | None = None, instruction_template: str | None = None) -> str:
    """The sha256 of what a model's loader settings are: the same in every process. A setting that JSON cannot
    hold is written as :func:`stable_name` writes it (a function by its module and qualified name, never by its
    address), so a loader argument such as gte-Qwen2's ``instruction_template`` keeps one identity; settings
    without a function digest as they always have. The instruction template of an instruction wrapper (set by a
    loader function too, as Qwen3-Embedding's) is part of it where there is one."""
    fields = {"implementation": implementation, "settings": dict(settings), "modules": modules,
              "default_prompt": default_prompt}
    if instruction_template is not None:
        fields["instruction_template"] = instruction_template
    blob = json.dumps(fields, sort_keys=True, default=stable_name)
    return hashlib.sha256(blob.encode()).hexdigest()


def stable_name(value: Any) -> str:
    """A value as an identity records it: a class as ``str()`` writes it (no address in it), a function or other
    callable by ``module.qualname``, a nested function or lambda (whose qualified name is not unique) by the
    sha256 of its source, a ``functools.partial`` by its function and arguments, anything else by ``str()``.

    >>> stable_name(json.dumps), stable_name(int)
    ('json.dumps', "<class 'int'>")
    """
    if isinstance(value, type) or not callable(value):
        return str(value)
    if isinstance(value, functools.partial):
        args = json.dumps([list(value.args), value.keywords], sort_keys=True, default=stable_name)
        return f"partial({stable_name(value.func)}, {args})"
    module = getattr(value, "__module__", None) or type(value).__module__
    qualname = getattr(value, "__qualname__", None) or type(value).__qualname__
    if "<" not in qualname:
        return f"{module}.{qualname}"
    try:
        source = inspect.getsource(value)
    except (OSError, TypeError):  # no source to read (built in C, typed at a prompt): its name is all there is
        return f"{module}.{qualname}"
    return f"{module}.{qualname}:sha256={hashlib.sha256(source.encode()).hexdigest()[:16]}"


def module_name(module: Any) -> str:
    """A pipeline module as the extraction records it: its class, with its pooling mode or output size."""
    name = type(module).__name__
    if name == "Pooling":
        return f"Pooling({getattr(module, 'pooling_mode', '?')})"
    if name == "Dense":
        return f"Dense({getattr(module, 'out_features', '?')})"
    return name


def static_embedding(st: Any) -> Any | None:
    """The ``StaticEmbedding`` module a static (model2vec) pipeline starts with; None for any other."""
    first = st[0] if st is not None and len(st) else None
    return first if type(first).__name__ == "StaticEmbedding" else None


def routes_by_task(st: Any) -> bool:
    """Whether ``encode_query`` / ``encode_document`` differ from ``encode`` beyond the prompt: a Router
    module, or per-task lengths or query expansion in the Transformer module."""
    for module in st.modules():
        if type(module).__name__ == "Router":
            return True
        if any(getattr(module, a, None) is not None for a in ("query_length", "document_length", "query_expansion")):
            return True
    return False


def commit_of(st: Any) -> str | None:
    config = getattr(getattr(st[0], "model", None), "config", None) if st is not None else None
    return getattr(config, "_commit_hash", None)


def views(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays as consecutive views of one block: a batch's token vectors, kept for the whole run, are one
    allocation instead of one per text (tens of thousands of small arrays left among the forward pass's
    temporaries fragmented the heap and slowed the encode itself by several percent)."""
    if not arrays:
        return arrays
    block = np.concatenate(arrays, axis=0)
    bounds = np.cumsum([0, *(len(a) for a in arrays)])
    return [block[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def numpy_ints(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().float().cpu().numpy()
    return np.asarray(value, dtype=np.float32)
