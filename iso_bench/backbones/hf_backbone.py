"""Load an encoder and extract raw vectors from its hidden states.

The backbone is the only place that runs the network. It batches texts by length, runs without
gradients, and turns hidden states into three kinds of raw vectors:

- ``sentence``: one pooled vector per text (mean over real tokens, CLS, first-last-avg, or the last real token,
  as decoder embedders pool);
- ``tokens``: the vectors of a text's tokens without special tokens, for token-level post-processing;
- ``span``: the mean of the sub-token vectors that overlap a character span, for word-level tasks.

Example:
    >>> bb = Backbone("sentence-transformers/all-MiniLM-L6-v2")       # doctest: +SKIP
    >>> bb.encode(["A man plays a guitar."], kinds=("sentence",))["sentence"][0].shape  # doctest: +SKIP
    (384,)

Which network makes the vectors is chosen by :func:`load_backbone`: a model that mteb's registry knows is
run by mteb's own implementation of it (:mod:`iso_bench.backbones.mteb_backbone`: its prompts, pooling, normalisation
and max length, so the raw variant is the model MTEB evaluates); any other model, or a request for a
``pooling`` or ``layer``, by :class:`Backbone` here.

Encoders and decoders alike: a decoder's tokenizer often has no pad token, and needs none in the equal-length plan;
where a plan pads, a decoder gets position ids that follow the attention mask (``cumsum(mask) - 1``), so that
left padding does not move its learned absolute positions. The network runs in the precision the extraction
records (:mod:`iso_bench.backbones.precision`); layers and poolings are summed in float32.

torch and transformers are imported inside the functions that need them: importing this module (the command
line reads :data:`POOLINGS`) loads neither.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.backbones.base import (
    EQUAL_LENGTH,
    KINDS,
    BackboneError,
    check_request,
    check_tokenizer,
    in_input_order,
    load_error,
    model_label,
    plan_batches,
    span_rows,
    stream_batches,
)
from iso_bench.backbones.extraction import (  # noqa: F401 - POOLINGS, ExtractionError, SAME_POOLING: named here too
    POOLINGS,
    SAME_POOLING,
    Extraction,
    ExtractionError,
    default_extraction,
    unreplayable,
)
from iso_bench.backbones.features import Tokens, collate, from_encoding
from iso_bench.backbones.precision import FLOAT32, check_dtype_device, checkpoint_dtype, torch_dtype
from iso_bench.files import folder_revision

logger = logging.getLogger(__name__)


class NoTokens(BackboneError):
    """A text to which the tokenizer gives no token (an empty text, where no BOS or other special token is
    added); ``text`` is that text, so that whoever knows where it comes from (a task) can say so."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text

class Backbone:
    """A Hugging Face encoder that returns raw vectors of every kind from one forward pass per batch.

    Args:
        model_id: a hub id (``org/name``) or a local folder.
        revision: a hub revision; the resolved commit is recorded in ``self.revision``.
        device: ``"cpu"``, ``"cuda"``, ...; default: CUDA when available.
        extraction: how vectors are pooled; default: :func:`default_extraction`.
        trust_remote_code: passed to transformers; off unless the user asks.
    """

    kinds = KINDS  # every kind of vector comes from the hidden states
    batch_size = 32  # texts per forward pass when the caller does not say

    def __init__(
        self,
        model_id: str,
        revision: str | None = None,
        *,
        device: str | None = None,
        extraction: Extraction | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        import torch  # lazily: torch takes seconds to import
        from transformers import AutoModel, AutoTokenizer  # lazily: transformers loads torch

        self.model_id = model_label(model_id)  # a local folder by its name; its files by their digest
        self.extraction = extraction or default_extraction(model_id, revision)
        self.checkpoint_dtype = checkpoint_dtype(model_id, revision)  # what a cache of unrecorded precision held
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        check_dtype_device(self.extraction.dtype, self.device)  # one line, before the weights load
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                model_id, revision=revision, trust_remote_code=trust_remote_code
            )
            self.model = AutoModel.from_pretrained(
                model_id, revision=revision, trust_remote_code=trust_remote_code,
                dtype=torch_dtype(self.extraction.dtype),  # what the extraction records, never the checkpoint's guess
            )
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: weights that do not fit config.json
            raise BackboneError(load_error(model_id, revision, exc)) from exc
        check_tokenizer(self.tokenizer, model_id)
        if not getattr(self.tokenizer, "is_fast", False):
            raise BackboneError(
                f"model {model_id!r} has no fast tokenizer; iso-bench needs character offsets for spans"
            )
        if getattr(self.model.config, "is_encoder_decoder", False):
            raise BackboneError(f"model {model_id!r} is an encoder-decoder ({type(self.model).__name__}); iso-bench "
                                "reads the hidden states of encoders and of decoders, not of both together")
        self.model.eval().to(self.device)
        self.decoder = is_decoder(self.model.config)
        self._pad = self.tokenizer.pad if self.tokenizer.pad_token is not None else _padder(self.tokenizer)
        local = Path(model_id)
        self.revision = (
            folder_revision(local)
            if local.is_dir()
            else getattr(self.model.config, "_commit_hash", None) or revision or "unknown"
        )
        n_states = self.model.config.num_hidden_layers + 1
        if not -n_states <= self.extraction.layer < n_states:
            raise BackboneError(
                f"layer {self.extraction.layer} does not exist in {model_id!r}: hidden_states has "
                f"{n_states} entries (0 = embeddings, {n_states - 1} = last)"
            )
        model_max = getattr(self.tokenizer, "model_max_length", 512) or 512
        pos_max = getattr(self.model.config, "max_position_embeddings", 512) or 512
        self._limit = min(int(model_max), int(pos_max))
        if self.extraction.max_length > self._limit:  # the window the model has, in its cache key and record
            self.extraction = replace(self.extraction, max_length=self._limit)
        self.max_length = self.extraction.max_length
        self.dim = int(self.model.config.hidden_size)

    def with_extraction(self, extraction: Extraction) -> Backbone:
        """A view of the same loaded network with other extraction settings (no reload)."""
        other = object.__new__(Backbone)
        other.__dict__.update(self.__dict__)
        other.extraction = replace(extraction, max_length=min(extraction.max_length, self._limit))
        other.max_length = other.extraction.max_length
        return other

    def describe(self) -> dict[str, Any]:
        """What identifies these vectors: ``vectors: "hf"`` (this backbone made them), model, revision and
        extraction settings (which say ``"hf"`` too, for the record every result carries), with the ``precision``
        the network ran in, float32 included (records without it were written before precision was recorded)."""
        return {
            "vectors": "hf",
            "model": self.model_id,
            "revision": self.revision,
            "extraction": {"vectors": "hf", **self.extraction.to_dict(), "max_length": self.max_length,
                           "precision": self.extraction.dtype or FLOAT32},
        }

    def prompt_context(self, task_metadata: Any = None, prompt_type: Any = None) -> None:
        """The prompt part of a cache key: none, this backbone encodes every text as it is."""
        return None

    # ---------------------------------------------------------------------------------------------
    def encode(
        self,
        texts: Sequence[str],
        *,
        kinds: Sequence[str] = ("sentence",),
        spans: Sequence[Sequence[tuple[int, int]]] | None = None,
        batch_size: int = 32,
        progress: bool = True,
        desc: str = "encoding",
        task_metadata: Any = None,
        prompt_type: Any = None,
    ) -> dict[str, list[np.ndarray]]:
        """Encode ``texts`` once and return, per requested kind, one array per text (input order).

        ``sentence`` arrays have shape ``(dim,)``; ``tokens`` arrays ``(n_tokens, dim)``; ``span`` arrays
        ``(n_spans, dim)``, one row per character ``(start, end)`` span that ``spans`` gives for the text
        (required for the ``span`` kind): a text with several target words is encoded once. A span that
        lies beyond ``max_length`` tokens gets a row of NaN, which callers must count and handle.
        ``task_metadata`` and ``prompt_type`` are accepted for the common interface and ignored: this
        backbone adds no prompt.
        """
        chunks = self.encode_chunks(texts, kinds=kinds, spans=spans, batch_size=batch_size, progress=progress,
                                    desc=desc)
        return in_input_order(len(texts), kinds, chunks)

    def encode_chunks(self, texts: Sequence[str], *, kinds: Sequence[str] = ("sentence",),
                      spans: Sequence[Sequence[tuple[int, int]]] | None = None, batch_size: int = 32,
                      chunk: int | None = None, progress: bool = True, desc: str = "encoding",
                      task_metadata: Any = None, prompt_type: Any = None
                      ) -> Iterator[tuple[list[int], dict[str, list[np.ndarray]]]]:
        """:meth:`encode` as ``(indices, rows per kind)`` every ``chunk`` texts (None: all at once) of one batch
        plan over all of ``texts``, each text tokenized once (its offsets from the same call)."""
        import torch  # lazily: torch takes seconds to import

        check_request(texts, kinds, spans)
        if not texts:
            return
        rows = "tokens" in kinds or "span" in kinds
        tokens = from_encoding(self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                                              return_special_tokens_mask=rows, return_offsets_mapping="span" in kinds),
                               len(texts))
        empty = tokens.lengths.index(0) if 0 in tokens.lengths else None
        if empty is not None:
            raise NoTokens(f"text {empty} ({texts[empty]!r}) has no tokens: the tokenizer of {self.model_id!r} "
                           "adds no special tokens, so it gives the network nothing to read; leave it out",
                           texts[empty])
        cut = sum(n >= self.max_length for n in tokens.lengths)
        if cut:
            logger.warning("%d of %d texts reach the window of %s (%d tokens) and are cut there", cut, len(texts),
                           self.model_id, self.max_length)
        batches = plan_batches(tokens.lengths, batch_size, self.extraction.batching)
        fill = tokens.lengths if self.extraction.batching == EQUAL_LENGTH else None  # few-row passes filled

        def encode_batch(run: list[int]) -> dict[str, list[np.ndarray]]:
            batch_spans = [spans[i] for i in run] if "span" in kinds else None
            with torch.inference_mode():
                return self._encode_batch([texts[i] for i in run], run, tokens, kinds, batch_spans)

        yield from stream_batches(batches, kinds, encode_batch, desc, progress, fill, chunk)

    def iter_hidden_states(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = True,
                           desc: str = "encoding") -> Any:
        """Yield ``(states, real)`` per batch of the equal-length plan (no padding, so no pad token is needed):
        ``states`` is a float32 array ``(n_layers + 1, batch, tokens, dim)`` of every hidden state (index 0 =
        embeddings) and ``real`` a boolean ``(batch, tokens)`` mask of the tokens to analyse: an encoder's
        non-special tokens; every token of a decoder, its first position and BOS included. Texts without tokens
        are left out. For analyses over all layers that must not hold every vector at once."""
        import torch  # lazily: torch takes seconds to import
        from tqdm.auto import tqdm  # lazily: only where a bar is shown

        tokens = from_encoding(self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                                              return_special_tokens_mask=True), len(texts))
        batches = [b for b in plan_batches(tokens.lengths, batch_size, EQUAL_LENGTH) if tokens.lengths[b[0]]]
        with torch.inference_mode():
            for run in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                states = torch.stack([s.float() for s in self._forward(collate(tokens, run))]).cpu().numpy()
                special = np.asarray([tokens.special[i] for i in run], dtype=bool)
                yield states, np.ones_like(special) if self.decoder else ~special

    def token_ids(self, texts: Sequence[str], *, task_metadata: Any = None, prompt_type: Any = None
                  ) -> list[np.ndarray]:
        """The tokenizer id of each token vector of ``texts``: per text, the ids of its real, non-special
        tokens, in the order of its ``tokens`` rows (the same tokenizer call as the forward pass)."""
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                             return_special_tokens_mask=True)
        return [np.asarray(ids, dtype=np.int64)[~np.asarray(special, dtype=bool)]
                for ids, special in zip(enc["input_ids"], enc["special_tokens_mask"], strict=True)]

    def _encode_batch(self, texts: list[str], run: list[int], tokens: Tokens, kinds: Sequence[str],
                      spans: list[Sequence[tuple[int, int]]] | None) -> dict[str, list[np.ndarray]]:
        import torch  # lazily: torch takes seconds to import

        features = collate(tokens, run, self._pad)
        states = self._forward(features)
        if self.extraction.pooling == "first-last-avg":
            hidden = (states[1].float() + states[-1].float()) / 2  # summed in float32, whatever the network's dtype
        else:
            hidden = states[self.extraction.layer].float()
        hidden = hidden.cpu()
        mask = features["attention_mask"].bool()
        result: dict[str, list[np.ndarray]] = {}
        if "sentence" in kinds:
            result["sentence"] = list(self._pooled(hidden, mask).numpy().astype(np.float32))
        if "pool" in kinds:  # what the pooling reads: every row of the text (its specials too), or its one row
            one = self.extraction.pooling in ("cls", "last-token")
            ends = last_positions(mask) if self.extraction.pooling == "last-token" else torch.zeros(len(run), dtype=int)
            result["pool"] = [hidden[b, int(ends[b])][None].numpy().astype(np.float32) if one
                              else hidden[b][mask[b]].numpy().astype(np.float32) for b in range(len(run))]
        if "tokens" in kinds or "span" in kinds:
            own = [(hidden[b][mask[b]], torch.from_numpy(~np.asarray(tokens.special[i], dtype=bool)))
                   for b, i in enumerate(run)]  # per text: its token vectors without padding, its real tokens
            if "tokens" in kinds:
                result["tokens"] = [h[real].numpy().astype(np.float32) for h, real in own]
            if "span" in kinds:
                assert spans is not None
                result["span"] = [span_rows(text, text_spans, h, torch.from_numpy(tokens.offsets_of(i)), real,
                                            self.max_length)
                                  for text, text_spans, (h, real), i in zip(texts, spans, own, run, strict=True)]
        return result

    def _pooled(self, hidden: Any, mask: Any, normalize: bool = True) -> Any:
        """The extraction's pooling of a batch's token vectors ``hidden`` ``(batch, tokens, dim)`` under ``mask``,
        then its normalisation (where ``normalize``)."""
        import torch  # lazily: torch takes seconds to import

        if self.extraction.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.extraction.pooling == "last-token":
            pooled = hidden[torch.arange(len(hidden)), last_positions(mask)]
        else:
            m = mask.unsqueeze(-1).float()
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.extraction.normalize and normalize else pooled

    pools_by_average = True
    """Every pooling of the extraction averages the rows it reads (mean, first-last-avg: a mean of averaged rows;
    cls, last-token: one row): an affine method may come after it (:func:`.pool_replay.pools_first`)."""

    def pool(self, rows: Sequence[np.ndarray], between: Any = None, **_: Any) -> np.ndarray:
        """Sentence vectors from (transformed) pooled rows (the ``pool`` kind): the extraction's own pooling
        and normalisation on them, texts of one length at a time (one row each under cls and last-token).
        ``between``: a function of the float32 matrix of every text's pooled vector, run before the
        normalisation (:func:`~iso_bench.backbones.pool_replay.replay`)."""
        import torch  # lazily: torch takes seconds to import

        width = rows[0].shape[1] if len(rows) else self.dim
        out = np.zeros((len(rows), width), np.float32)
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault(len(r), []).append(i)
        for length, idx in groups.items():
            hidden = torch.from_numpy(np.stack([np.asarray(rows[i], np.float32) for i in idx]))
            mask = torch.ones(len(idx), length, dtype=torch.bool)
            if self.extraction.pooling == "cls" or self.extraction.pooling == "last-token":
                hidden, mask = hidden[:, :1], mask[:, :1]  # the one row the store kept
            out[idx] = self._pooled(hidden, mask, normalize=between is None).numpy()
        if between is not None and len(rows):
            out = np.asarray(between(out), np.float32)
            if self.extraction.normalize:
                out = torch.nn.functional.normalize(torch.from_numpy(out), dim=-1).numpy()
        return out

    def _forward(self, features: dict[str, Any]) -> Any:
        """Every hidden state of one batch; a padded batch of a decoder with position ids that follow its mask."""
        mask = features["attention_mask"]
        if self.decoder and not bool(mask.all()):
            features = {**features, "position_ids": (mask.long().cumsum(-1) - 1).clamp(min=0)}
        outputs = self.model(**{k: v.to(self.device) for k, v in features.items()}, output_hidden_states=True)
        states = getattr(outputs, "hidden_states", None)
        if states is None:
            raise BackboneError(f"model {self.model_id!r} ({type(self.model).__name__}) returns no hidden states")
        return states


def last_positions(mask: Any) -> Any:
    """Per row of an attention ``mask`` ``(batch, tokens)``, the index of its last real token (its last 1),
    whichever side the padding is on.

    >>> import torch
    >>> last_positions(torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1], [1, 1, 1, 1]])).tolist()
    [2, 3, 3]
    """
    import torch  # lazily: torch takes seconds to import

    return (mask.long() * torch.arange(1, mask.shape[1] + 1)).argmax(1)


def is_decoder(config: Any) -> bool:
    """Whether a model's config is a decoder's (causal attention: GPT-2, Llama, Qwen, Mistral): marked so, or of
    a type transformers has a causal language model and no masked one for (BERT has both)."""
    from transformers.models.auto.modeling_auto import (  # lazily: transformers loads torch
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    kind = getattr(config, "model_type", "")
    return bool(getattr(config, "is_decoder", False)) or (
        kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def _padder(tokenizer: Any) -> Any:
    """A ``pad`` for a tokenizer without a pad token (GPT-2's): rows filled on its padding side with its EOS id
    (else 0) and a mask of 0, which no real token attends to."""
    fill = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    left = getattr(tokenizer, "padding_side", "right") == "left"

    def pad(columns: dict[str, list[Any]], **_: Any) -> dict[str, Any]:
        import torch  # lazily: torch takes seconds to import

        width = max(len(row) for row in columns["input_ids"])
        out = {}
        for name, rows in columns.items():
            value = fill if name == "input_ids" else 0
            out[name] = torch.tensor([[value] * (width - len(r)) + list(r) if left else list(r) + [value] *
                                      (width - len(r)) for r in rows], dtype=torch.long)
        return out

    return pad
