"""A sentence-transformers pipeline's pooling and the modules after it, replayed on token vectors.

A token-level variant is the model with a post-processing step just before its pooling: the method transforms
the token vectors the pooling reads (the ``pool`` kind of raw vectors: special tokens and prompt tokens
included wherever the pooling reads them), then the pipeline's own modules after its Transformer (``Pooling``,
``Dense``, ``Normalize``, ...) run on them, in their own dtype and on their own device, and ``truncate_dim``
cuts the result as the pipeline's ``encode`` does. So ``raw-level=token`` is ``raw``.

What the pooling reads is asked of the ``Pooling`` module itself, never computed beside it: where it reads one
row (``cls``, ``lasttoken``), that row is found by pooling the rows' positions (:func:`read_row`), so the store
keeps one row per text; any other pooling reads every row the model attends to, and its ``prompt_length``
handling (``include_prompt``) is the module's own. A static embedding (``StaticEmbedding``: an EmbeddingBag
whose mode is the mean of the rows of every token id) is replayed as that mean, then the modules after it.
Importing this module loads neither torch nor sentence-transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from iso_bench.backbones.features import to_host
from iso_bench.methods.base import MethodError

ONE_ROW = ("cls", "lasttoken")
"""Pooling modes that read a single row of the text: the store keeps that row only."""
SAME_SPACE = ("mean", "mean_sqrt_len_tokens", "weightedmean", "cls", "lasttoken")
"""Pooling modes whose output is a combination of the rows it reads (any linear map commutes with them)."""


def pooling_module(st: Any) -> Any | None:
    """The pipeline's ``Pooling`` module; None where it has none (a static embedding pools by itself)."""
    return next((m for m in st if type(m).__name__ == "Pooling"), None)


def pooling_modes(st: Any) -> tuple[str, ...]:
    """The pooling modes of the pipeline, as its ``Pooling`` module names them (a static embedding: mean)."""
    module = pooling_module(st)
    if module is None:
        return ("mean",)
    mode = module.pooling_mode
    return (mode,) if isinstance(mode, str) else tuple(mode)


def after_pooling(st: Any) -> list[Any]:
    """The modules a text's token vectors go through after the pipeline's first module (its Transformer or
    static embedding): the pooling and what follows it."""
    return list(st)[1:]


def keeps_space(st: Any) -> bool:
    """Whether the pipeline's pooling and what follows it treat every direction of the token vectors alike up to
    a rotation (mean-like or single-row pooling, then Normalize at most): then a method's output may be in
    any orthonormal coordinates. A head (Dense, LayerNorm), max pooling or a truncation does not."""
    rest = [type(m).__name__ for m in after_pooling(st) if type(m).__name__ not in ("Pooling", "Normalize")]
    return not rest and all(m in SAME_SPACE for m in pooling_modes(st)) and st.truncate_dim is None


def read_row(st: Any, length: int, prompt_length: int | None) -> int | None:
    """The one row of a text of ``length`` tokens that the pipeline's pooling reads (cls, lasttoken; the prompt
    excluded where ``include_prompt`` is false), found by running its ``Pooling`` on the rows' positions; None
    where it reads several rows."""
    import torch  # lazily: torch takes seconds to import

    module = pooling_module(st)
    if module is None or pooling_modes(st) not in ((m,) for m in ONE_ROW):
        return None
    positions = torch.arange(1, length + 1, dtype=torch.float64).view(1, length, 1)
    features = {"token_embeddings": positions, "attention_mask": torch.ones(1, length, dtype=torch.int64)}
    if prompt_length:
        features["prompt_length"] = prompt_length
    return int(module(features)["sentence_embedding"].item()) - 1


def pool_rows(st: Any, hidden: np.ndarray, prompt_length: int | None) -> np.ndarray:
    """What the pooling reads of one text's token vectors ``hidden`` (every row it attends to): its one row, or
    all of them."""
    row = read_row(st, len(hidden), prompt_length)
    return hidden if row is None else hidden[row:row + 1]


def replay(st: Any, rows: Sequence[np.ndarray], prompt_length: int | None, static: bool = False) -> np.ndarray:
    """The sentence vectors of texts whose pooled rows (:func:`pool_rows`, transformed) are ``rows``: the
    pipeline's modules after its first run on them, texts of one length at a time (no padding), in the modules'
    dtype and on their device; float32 ``(len(rows), dim)``."""
    import torch  # lazily: torch takes seconds to import

    first = next(iter(st.parameters()), None)
    dtype = first.dtype if first is not None else torch.float32
    device = st.device
    one = read_row(st, 1, None) is not None  # one row per text: the prompt was excluded when it was read
    out: list[np.ndarray | None] = [None] * len(rows)
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(len(r), []).append(i)
    with torch.inference_mode():
        for length, idx in groups.items():
            T = torch.from_numpy(np.stack([np.asarray(rows[i], np.float32) for i in idx])).to(device, dtype)
            if static:  # the EmbeddingBag's mean over every token id, then the modules after it
                features: dict[str, Any] = {"sentence_embedding": T.float().mean(dim=1).to(dtype)}
            else:
                features = {"token_embeddings": T,
                            "attention_mask": torch.ones(len(idx), length, dtype=torch.int64, device=device)}
                if prompt_length and not one:
                    features["prompt_length"] = prompt_length
            for module in after_pooling(st):
                features = module(features)
            sentence = features["sentence_embedding"]
            if st.truncate_dim is not None:  # as the pipeline's encode truncates
                sentence = sentence[..., : st.truncate_dim]
            for i, v in zip(idx, to_host([sentence])[0], strict=True):
                out[i] = v
    return np.stack(out).astype(np.float32) if out else np.zeros((0, 0), np.float32)


def before_pooling(method: Any, spec: str, backbone: Any) -> Any:
    """The transform a token-level ``method`` applies to the rows the pooling reads: its output in the model's
    coordinates. A method whose output is in principal coordinates (whiten, zipfian-whiten, whiten-k: rotated,
    fewer where directions are dropped) is mapped back (``model_coordinates``: ``(x - mu) V Lambda^-1/2 V^T``,
    width d); one whose output cannot be mapped back (flow's latent space) is refused where a head, max pooling
    or a truncation follows (``backbone.keeps_space`` false), where it would change what the model computes."""
    back = getattr(method, "model_coordinates", None)
    if back is not None:
        return back
    if not getattr(method, "model_space", True) and not getattr(backbone, "keeps_space", True):
        raise MethodError(f"method {spec!r}: its output is not in the model's coordinates, and the model's head, "
                          f"max pooling or truncation follows the token vectors; use {spec}-level=sentence")
    return getattr(method, "unstaged_transform", method.transform)  # a storage stage: after the pooling
