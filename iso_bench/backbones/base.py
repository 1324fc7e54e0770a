"""What every backbone shares: the :class:`BackboneProtocol` the rest of iso-bench types against, the kinds
of raw vectors, and the batching and span helpers both concrete backbones use.

The concrete backbones (:mod:`iso_bench.backbones.hf_backbone`, :mod:`iso_bench.backbones.mteb_backbone`) are named
only by :mod:`iso_bench.backbones.loader`. Importing this module loads neither torch nor mteb.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from iso_bench.registry import IsoBenchError

KINDS = ("sentence", "tokens", "span", "pool")
"""The kinds of raw vectors: one pooled vector per text, a text's own token vectors, the mean vector of a span,
and the token vectors the model's pooling reads (special and prompt tokens too where it reads them; one row for
cls and last-token pooling), which token-level variants transform before the model's own pooling."""


LOCAL = "local"
"""The organisation a local model folder is named under: ``local/<folder name>`` (mteb names models
``organization/name``); the folder's files are recorded by their digest (its revision), never by its path."""


class BackboneError(IsoBenchError, RuntimeError):
    """The model cannot be loaded or run as asked; the message names the model and what to do."""


class TokenVectorsUnavailable(BackboneError):
    """Token or span vectors were asked of a model whose implementation gives sentence vectors only."""


def load_error(model_id: str, revision: str | None, exc: Exception) -> str:
    """The one-line message of a :class:`BackboneError` for a model transformers cannot load: weights whose
    shapes do not fit ``config.json`` (a RuntimeError of transformers, after its load report), a local folder
    without what it needs, or a hub id that is not in the cache (the ``HF_HUB_OFFLINE`` hint only for a hub id:
    a folder is never downloaded)."""
    reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
    folder = Path(model_id).is_dir()
    if isinstance(exc, RuntimeError):
        if "mismatch" not in str(exc).lower():
            return f"cannot load model {model_id!r} (revision {revision}): {reason}"
        where = "the folder's" if folder else "the revision's"
        return (f"cannot load model {model_id!r} (revision {revision}): its weights do not fit {where} config.json "
                "(tensor shapes differ, as transformers' load report above lists); put back the config.json the "
                "weights were saved with, or save the model again (save_pretrained)")
    if folder:
        hint = "check the folder: it needs config.json, the weights and a tokenizer, as save_pretrained writes them"
    elif os.environ.get("HF_HUB_OFFLINE") == "1":
        hint = ("HF_HUB_OFFLINE=1 is set: put the model into the Hugging Face cache first (HF_HUB_CACHE) or pass a "
                "local folder")
    else:
        hint = "check the id and revision, or pass a local folder"
    return f"cannot load model {model_id!r} (revision {revision}): {reason}. {hint}"


def check_tokenizer(tokenizer: Any, model_id: str) -> None:
    """Refuse, in one line, a tokenizer whose vocabulary holds its special tokens only: what transformers builds for
    a model whose files have no tokenizer (it would read every text as unknown tokens, or as none)."""
    if tokenizer is None:
        return
    try:
        words = len(tokenizer) - len(set(tokenizer.all_special_ids))
    except (TypeError, AttributeError):  # not a transformers tokenizer (a static embedding's): nothing to check
        return
    if words <= 0:
        raise BackboneError(f"the tokenizer of {model_id!r} is empty (its vocabulary holds only its special tokens): "
                            "the model's files have no tokenizer (tokenizer.json, or vocab files and "
                            "tokenizer_config.json); save the tokenizer beside the weights (tokenizer.save_pretrained)")


def model_label(model: str) -> str:
    """The name results carry for ``model``: a hub id is itself, a local folder ``local/<folder name>``.

    >>> model_label("sentence-transformers/all-MiniLM-L6-v2")
    'sentence-transformers/all-MiniLM-L6-v2'
    """
    folder = Path(model).expanduser()
    return f"{LOCAL}/{folder.resolve().name}" if folder.is_dir() else model


def read_model_json(folder_or_id: str, filename: str, revision: str | None) -> dict | list | None:
    """Read a small JSON file of a model (local folder or hub id, from the local Hugging Face cache when
    offline); None when it does not exist. The one reader of a model's own files: each file is parsed once per
    process while it stays the same (its path, size and modification time), and a file that is not JSON is a
    :class:`BackboneError` in one line that names it."""
    local = Path(folder_or_id)
    if local.is_dir():
        path = local / filename
        return _parsed(path) if path.is_file() else None
    try:
        from transformers.utils import cached_file  # lazily: transformers loads torch

        found = cached_file(
            folder_or_id,
            filename,
            revision=revision,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )
    except Exception:  # noqa: BLE001 - a missing optional file is not an error
        return None
    return _parsed(Path(found)) if found else None


_PARSED: dict[tuple[str, int, int], Any] = {}
"""The model files parsed in this process, by (path, size, modification time): a changed file is read again."""


def _parsed(path: Path) -> Any:
    """The JSON content of ``path`` (a copy: callers may change it), parsed once while the file stays the same."""
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _PARSED:
            _PARSED[key] = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, OSError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackboneError(f"cannot read the model file {path}: {reason}; it is damaged or cut short: put back "
                            "the file as the model was saved (or download the model again)") from None
    return copy.deepcopy(_PARSED[key])


@runtime_checkable
class BackboneProtocol(Protocol):
    """What makes a model's raw vectors: the one interface the store, the runner and the encoder use.

    ``encode`` returns, per asked kind, one array per text (``sentence``: ``(dim,)``; ``tokens``:
    ``(n_tokens, dim)``; ``span``: ``(n_spans, dim)``); ``describe()`` is the extraction record a result
    carries (``describe()["vectors"]`` names the path that made the vectors).
    """

    model_id: str
    revision: str
    device: str
    batch_size: int
    max_length: int

    @property
    def dim(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...

    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] = ("sentence",),
               spans: Sequence[Any] | None = None, **kwargs: Any) -> dict[str, list[np.ndarray]]: ...

    def prompt_context(self, task_metadata: Any = None, prompt_type: Any = None) -> Any: ...


def check_request(texts: Sequence[str], kinds: Sequence[str], spans: Sequence[Any] | None) -> None:
    """Refuse an unknown kind, a ``span`` request without one list of spans per text, or a non-string text."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown vector kinds {sorted(unknown)}; choose from {KINDS}")
    if "span" in kinds and (spans is None or len(spans) != len(texts)):
        raise ValueError("the 'span' kind needs a list of (start, end) character spans per text")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")


def span_rows(text: str, spans: Sequence[tuple[int, int]], hidden: Any, offsets: Any, real: Any,
              max_length: int) -> np.ndarray:
    """``(len(spans), dim)``: the mean vector of the real tokens that overlap each character span of
    ``text`` (``hidden``, ``offsets`` and ``real`` are this text's rows: token vectors, character offsets
    and the mask of real, non-special tokens)."""
    import torch  # lazily: torch takes seconds to import

    kept_end = int(offsets[real][:, 1].max()) if bool(real.any()) else 0
    truncated = kept_end < len(text.rstrip())
    rows = []
    for s, e in spans:
        sel = real & (offsets[:, 0] < e) & (offsets[:, 1] > s)
        if truncated and s >= kept_end:
            # the span lies beyond max_length: no vector, marked NaN for the caller to count
            rows.append(torch.full((hidden.shape[-1],), float("nan")))
            continue
        if not bool(sel.any()):
            raise ValueError(
                f"span {s}:{e} ({text[s:e]!r}) of text {text[:60]!r} covers no token "
                f"(empty span, or cut off at max_length={max_length})"
            )
        rows.append(hidden[sel].mean(0))
    return torch.stack(rows).numpy().astype(np.float32)


EQUAL_LENGTH = "equal-length"
"""The batching policy of every backbone that sees its tokenizer: a batch holds texts of one token length only,
so it carries no padding, and a forward pass of fewer than :data:`MIN_ROWS` token rows is filled with copies of
its first text (their vectors are dropped). Then a text's vector does not depend on the other texts of its batch
(on the CPU: the same bits in any batch, under any cache state or task order; ``tests/test_reproducible.py``).
Why the fill: the CPU's matrix products take another code path for a product of very few rows (all-MiniLM-L6-v2,
MKL: a one-word text alone, 3 token rows, differs in the last bits from the same text beside another)."""
MIN_ROWS = 16
"""The fewest token rows (texts x tokens) an equal-length forward pass has: from 4 rows on, every batch of
all-MiniLM-L6-v2 gave the same bits per text; 16 leaves a margin and costs a few copies of one- or two-word texts."""
PADDED = "padded"
"""The policy of iso-bench before 0.2: batches of texts sorted by length and padded to their longest, so a text's
vector depended on its neighbours by up to ~1e-7 per coordinate. Kept to reproduce results written under it."""
MODEL_OWN = "model's own"
"""A model that encodes by itself, where iso-bench cannot group the texts (mteb's wrapper of a model without a
sentence-transformers pipeline, a model behind an API): outside the batch-independence guarantee."""
POLICIES = (EQUAL_LENGTH, PADDED)


def plan_batches(lengths: Sequence[int], batch_size: int, policy: str = EQUAL_LENGTH) -> list[list[int]]:
    """The batches (lists of text indices) that encode texts of token ``lengths``: longest first, in input order
    within a length; under :data:`EQUAL_LENGTH` a batch never mixes two lengths, under :data:`PADDED` it takes
    the next ``batch_size`` texts whatever their lengths.

    >>> plan_batches([3, 5, 3, 5, 5, 4], 2)
    [[1, 3], [4], [5], [0, 2]]
    >>> plan_batches([3, 5, 3, 5, 5, 4], 2, PADDED)
    [[1, 3], [4, 5], [0, 2]]
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown batching policy {policy!r}; choose one of {', '.join(POLICIES)}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    if policy == PADDED:
        return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    for i in order:
        if not batches or len(batches[-1]) == batch_size or lengths[batches[-1][0]] != lengths[i]:
            batches.append([])
        batches[-1].append(i)
    return batches


def filled(batch: Sequence[int], length: int, min_rows: int = MIN_ROWS) -> list[int]:
    """``batch`` with copies of its first text appended until its texts hold at least ``min_rows`` token rows
    (``length`` tokens each).

    >>> filled([7], 3), filled([7, 8], 12), filled([7], 40)
    ([7, 7, 7, 7, 7, 7], [7, 8], [7])
    """
    need = -(-min_rows // max(length, 1))  # texts to reach min_rows
    return [*batch, *[batch[0]] * max(0, need - len(batch))]


CHUNK_ROWS_PER_TEXT = 64
"""A chunk of ``chunk`` texts (:func:`stream_batches`) also closes once its texts hold ``chunk`` times this many
token rows, where the plan's lengths are known: 2,048 sentences of up to 64 tokens make a shard, as do 341
documents of 384 tokens, so that a crash or a stop loses minutes of encoding, not the hour that 2,048 long
documents take on a CPU. A text's vector does not depend on its chunk."""


def stream_batches(batches: Sequence[Sequence[int]], kinds: Sequence[str], encode_batch: Any, desc: str,
                   progress: bool, lengths: Sequence[int] | None = None, chunk: int | None = None
                   ) -> Iterator[tuple[list[int], dict[str, list[Any]]]]:
    """Run ``encode_batch(indices)`` over ``batches`` (:func:`plan_batches`), with a progress bar, and yield
    ``(indices, rows per kind)`` each time ``chunk`` texts or more are done, or texts of ``chunk`` x
    :data:`CHUNK_ROWS_PER_TEXT` token rows or more (all at the end without ``chunk``), in the plan's order: one
    plan for a whole request, written a chunk at a time. With the texts' token ``lengths`` (an equal-length plan),
    each forward pass is :func:`filled` to :data:`MIN_ROWS` token rows and the copies' rows are dropped."""
    from tqdm.auto import tqdm  # lazily: only where a bar is shown

    done: list[int] = []
    rows: dict[str, list[Any]] = {k: [] for k in kinds}
    token_rows = 0
    bar = tqdm(total=sum(len(b) for b in batches), desc=desc, unit="text", disable=not progress, leave=False)
    try:
        for batch in batches:
            idx = list(batch)
            run = filled(idx, lengths[idx[0]]) if lengths is not None and idx else idx
            for kind, values in encode_batch(run).items():
                rows[kind].extend(values[: len(idx)])
            done.extend(idx)
            token_rows += sum(lengths[i] for i in idx) if lengths is not None else 0
            bar.update(len(idx))
            if chunk is not None and (len(done) >= chunk or token_rows >= chunk * CHUNK_ROWS_PER_TEXT):
                yield done, rows
                done, rows, token_rows = [], {k: [] for k in kinds}, 0
        if done:
            yield done, rows
    finally:
        bar.close()


def in_input_order(n: int, kinds: Sequence[str], chunks: Iterable[tuple[list[int], dict[str, list[Any]]]]
                   ) -> dict[str, list[Any]]:
    """The rows of :func:`stream_batches`' chunks put back in input order, per kind."""
    out: dict[str, list[Any]] = {k: [None] * n for k in kinds}
    for idx, rows in chunks:
        for kind, values in rows.items():
            column = out[kind]
            for j, value in zip(idx, values, strict=True):
                column[j] = value
    return out


def run_batches(n: int, batches: Sequence[Sequence[int]], kinds: Sequence[str], encode_batch: Any, desc: str,
                progress: bool, lengths: Sequence[int] | None = None) -> dict[str, list[Any]]:
    """:func:`stream_batches` of a whole request at once, its rows per kind in input order."""
    return in_input_order(n, kinds, stream_batches(batches, kinds, encode_batch, desc, progress, lengths))
