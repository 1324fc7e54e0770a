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

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from iso_bench.backbones.features import to_host
from iso_bench.methods.base import MethodError
from iso_bench.numerics.linalg import row_blocks

TRANSFORM_BATCH = 4096  # texts whose pooled rows a token-level variant reads at a time
TRANSFORM_VALUES = 1 << 26  # values (rows x width) of rows it transforms and pools at a time, whole texts: O(block)
# memory, 512 MiB a float64 copy (174,762 rows at 384-d, 16,384 at 4,096-d)

ONE_ROW = ("cls", "lasttoken")
"""Pooling modes that read a single row of the text: the store keeps that row only."""
SAME_SPACE = ("mean", "mean_sqrt_len_tokens", "weightedmean", "cls", "lasttoken")
"""Pooling modes whose output is a combination of the rows it reads (any linear map commutes with them)."""
SUM_ONE = ("mean", "weightedmean", "cls", "lasttoken")
"""Pooling modes whose weights over the rows they read sum to one (an average): any affine map commutes with
them. Not ``mean_sqrt_len_tokens`` (its weights sum to the square root of the length), not ``max``."""


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


def pools_by_average(st: Any, static: bool = False) -> bool:
    """Whether the pipeline's pooling averages the rows it reads (one mode of :data:`SUM_ONE`, its ``Pooling``
    the module after its first; a static embedding's mean), so that an affine map may come after it."""
    if static:
        return True
    module = pooling_module(st)
    rest = after_pooling(st)
    return module is not None and bool(rest) and rest[0] is module and pooling_modes(st) in ((m,) for m in SUM_ONE)


def pool_rows(st: Any, hidden: np.ndarray, prompt_length: int | None) -> np.ndarray:
    """What the pooling reads of one text's token vectors ``hidden`` (every row it attends to): its one row, or
    all of them."""
    row = read_row(st, len(hidden), prompt_length)
    return hidden if row is None else hidden[row:row + 1]


def replay(st: Any, rows: Sequence[np.ndarray], prompt_length: int | None, static: bool = False,
           between: Any = None) -> np.ndarray:
    """The sentence vectors of texts whose pooled rows (:func:`pool_rows`, transformed) are ``rows``: the
    pipeline's modules after its first run on them, texts of one length at a time (no padding), in the modules'
    dtype and on their device; float32 ``(len(rows), dim)``.

    ``between``: a function of a float32 matrix (one pooled vector per text, in the input's order) run between the
    pooling and the modules after it, on every text's pooled vector at once (:func:`pools_first`: an affine method
    after a pooling whose weights sum to one gives what it gives on the rows, and costs a text's vector, not its
    rows). The pooling is the pipeline's ``Pooling`` (a static embedding: its mean)."""
    import torch  # lazily: torch takes seconds to import

    first = next(iter(st.parameters()), None)
    dtype = first.dtype if first is not None else torch.float32
    device = st.device
    one = read_row(st, 1, None) is not None  # one row per text: the prompt was excluded when it was read
    modules = after_pooling(st)
    split = 0 if between is None or static else 1  # modules run before ``between``: the Pooling
    if split and type(modules[0]).__name__ != "Pooling":
        raise ValueError(f"the pipeline's module after its first is {type(modules[0]).__name__}, not its Pooling")
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(len(r), []).append(i)
    out: list[np.ndarray | None] = [None] * len(rows)
    def finish(idx: list[int], features: dict[str, Any]) -> None:
        for module in modules[split:]:
            features = module(features)
        sentence = features["sentence_embedding"]
        if st.truncate_dim is not None:  # as the pipeline's encode truncates
            sentence = sentence[..., : st.truncate_dim]
        for i, v in zip(idx, to_host([sentence])[0], strict=True):
            out[i] = v

    with torch.inference_mode():
        pooled: list[tuple[list[int], dict[str, Any]]] = []
        for length, idx in groups.items():
            T = torch.from_numpy(np.stack([np.asarray(rows[i], np.float32) for i in idx])).to(device, dtype)
            if static:  # the EmbeddingBag's mean over every token id, then the modules after it
                features: dict[str, Any] = {"sentence_embedding": T.float().mean(dim=1).to(dtype)}
            else:
                features = {"token_embeddings": T,
                            "attention_mask": torch.ones(len(idx), length, dtype=torch.int64, device=device)}
                if prompt_length and not one:
                    features["prompt_length"] = prompt_length
            if between is None:
                finish(idx, features)
                continue
            for module in modules[:split]:
                features = module(features)
            pooled.append((idx, {"sentence_embedding": features["sentence_embedding"]}))  # the rows let go
        if pooled:  # ``between`` on every text's pooled vector at once, in the input's order
            P = np.empty((len(rows), pooled[0][1]["sentence_embedding"].shape[-1]), np.float32)
            for idx, features in pooled:
                P[idx] = to_host([features["sentence_embedding"]])[0]
            moved = np.asarray(between(P), np.float32)
            for idx, _ in pooled:
                finish(idx, {"sentence_embedding": torch.from_numpy(moved[idx]).to(device, dtype)})
    return np.stack(out).astype(np.float32) if out else np.zeros((0, 0), np.float32)


def before_pooling(method: Any, spec: str, backbone: Any) -> Any:
    """The transform a token-level ``method`` applies to the rows the pooling reads: its output in the model's
    coordinates. A method whose output is in principal coordinates (whiten, zipfian-whiten, whiten-k: rotated,
    fewer where directions are dropped) is mapped back (``model_coordinates``: ``(x - mu) V Lambda^-1/2 V^T``,
    width d); one whose output is not mapped back (flow's latent space, pca's principal coordinates) is refused
    where a head, max pooling or a truncation follows (``backbone.keeps_space`` false), where it would change what
    the model computes."""
    back = getattr(method, "model_coordinates", None)
    if back is not None:
        return back
    if not getattr(method, "model_space", True) and not getattr(backbone, "keeps_space", True):
        raise MethodError(f"method {spec!r}: its output is not in the model's coordinates, and the model's head, "
                          f"max pooling or truncation follows the token vectors; use {spec}-level=sentence")
    return getattr(method, "unstaged_transform", method.transform)  # a storage stage: after the pooling


def pools_first(method: Any, backbone: Any) -> bool:
    """Whether a token-level ``method`` may run after the model's pooling instead of before it, with the same
    result up to rounding: its transform is affine (``x -> (x - offset) @ matrix``, :meth:`Method.affine` of the
    method without its storage stage) and the pooling averages the rows it reads (``backbone.pools_by_average``).
    Then ``T(sum_i w_i x_i) = sum_i w_i T(x_i)`` wherever ``sum_i w_i = 1``, and the method transforms one vector
    per text instead of its 10 to 100 rows."""
    own = getattr(method, "method_class", type(method))
    return bool(getattr(backbone, "pools_by_average", False)) and own.affine(method) is not None


def whole_rows(transform: Any) -> Any:
    """``transform`` of a matrix, each row as it comes out of a product of any number of rows: a single row goes
    in twice (numpy multiplies one row by ``gemv``, which adds in another order than ``gemm``), so a text's vector
    does not depend on how many texts came with it."""

    def run(X: np.ndarray) -> np.ndarray:
        return transform(np.repeat(X, 2, axis=0))[:1] if len(X) == 1 else transform(X)

    return run


def pooled_batches(store: Any, method: Any, spec: str, texts: Sequence[str], *, skip_empty: bool = False,
                   desc: str | None = None, **where: Any) -> Iterator[np.ndarray]:
    """A token-level variant's sentence vectors of ``texts`` (before any storage stage), :data:`TRANSFORM_BATCH`
    texts at a time: the rows the model's pooling reads (``store.pool_rows``), transformed by the fitted ``method``
    (:func:`before_pooling`), then the model's pooling and head (``backbone.pool``); an affine method after a
    pooling that averages runs on the pooled vectors instead (:func:`pools_first`). Other methods transform at most
    :data:`TRANSFORM_VALUES` values of rows at a time (whole texts). A text without any token is refused, or left
    out with ``skip_empty`` (a fit corpus)."""
    backbone = store.backbone
    transform = before_pooling(method, spec, backbone)
    first = pools_first(method, backbone)
    extra = {"desc": desc} if desc else {}
    for i in range(0, len(texts), TRANSFORM_BATCH):
        batch = list(texts[i:i + TRANSFORM_BATCH])
        rows = store.pool_rows(batch, **extra, **where)
        lengths = [len(r) for r in rows]
        if skip_empty:
            rows = [r for r in rows if len(r)]
            lengths = [n for n in lengths if n]
        elif min(lengths, default=1) == 0:
            empty = [batch[j] for j, n in enumerate(lengths) if n == 0][:3]
            raise ValueError(f"texts without any token cannot be pooled at token level: {empty!r}")
        if not rows:
            continue
        if first:
            yield backbone.pool(rows, between=whole_rows(transform), **where)
            continue
        limit = max(2, TRANSFORM_VALUES // max(1, rows[0].shape[1]))  # rows of a block: its values bounded
        for a, b in row_blocks(lengths, limit):  # a method's float64 copies: a block's, not all
            Z, ends = transform(np.concatenate(rows[a:b], axis=0)), np.cumsum(lengths[a:b])
            yield backbone.pool(np.split(Z, ends[:-1]), **where)
