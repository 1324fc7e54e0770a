"""A sentence-transformers pipeline run by iso-bench: each text tokenized once per request, one batch plan per
request, each batch collated from the texts' features and run through the pipeline's own modules, its outputs
brought to the host once.

:class:`PipelineEncoder` is what :class:`iso_bench.backbones.mteb_backbone.MtebBackbone` runs a
sentence-transformers pipeline with. Where :func:`iso_bench.backbones.features.direct` says the pipeline can be fed
directly (a Transformer with a tokenizer, or a static embedding), the request is tokenized by the pipeline's own
preprocessing in one call, unpadded, with the character offsets the token vectors need from the same call, and
each batch goes through the pipeline's modules (``SentenceTransformer.__call__``: transformer, pooling, Dense,
Normalize) as its ``encode`` runs them, without tokenizing again, inferring the modality or switching to eval
mode per batch. Any other pipeline (a router, per-task lengths, a chat template) runs each batch through its own
``encode``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from iso_bench.backbones.base import (
    MIN_ROWS,
    PADDED,
    BackboneError,
    TokenVectorsUnavailable,
    plan_batches,
    span_rows,
    stream_batches,
)
from iso_bench.backbones.features import (
    Tokens,
    collate,
    direct,
    pipeline_tokens,
    static_collate,
    static_tokens,
    to_device,
    to_host,
)
from iso_bench.backbones.pipeline import as_numpy, numpy_ints, static_embedding, views
from iso_bench.backbones.pool_replay import pool_rows

Chunks = Iterator[tuple[list[int], dict[str, list[np.ndarray]]]]


class PipelineEncoder:
    """Runs the SentenceTransformer ``st`` for :class:`~iso_bench.backbones.mteb_backbone.MtebBackbone`."""

    def __init__(self, st: Any, model_id: str, max_length: int | None, batching: str) -> None:
        self.st, self.model_id, self.max_length, self.batching = st, model_id, max_length, batching
        self.how = direct(st)
        self._rows_matrix: np.ndarray | None = None  # a static pipeline's embedding matrix, read once
        st.eval()  # once: the pipeline's encode does it per call

    def stream(self, texts: list[str], kinds: Sequence[str], spans: Sequence[Any] | None, batch_size: int,
               chunk: int | None, progress: bool, desc: str, prompt: str, route: str | None) -> Chunks:
        """``(indices, rows per kind)`` every ``chunk`` texts of one plan over ``texts``."""
        if self.how is None:
            yield from self._stream_encode(texts, kinds, spans, batch_size, chunk, progress, desc, prompt, route)
            return
        import torch  # lazily: torch takes seconds to import

        static = self.how == "static"
        rows = "tokens" in kinds or "span" in kinds or "pool" in kinds
        offsets = "span" in kinds or (rows and bool(prompt))  # where the text's own tokens need them
        tokens = (static_tokens(static_embedding(self.st), texts, prompt, offsets) if static
                  else pipeline_tokens(self.st, texts, prompt, route, rows, offsets))
        padded = self.batching == PADDED
        if padded:  # iso-bench 0.1: by character length, padded batches
            lengths, fill = [len(t) for t in texts], None
        else:  # a static pipeline pads nothing: one group, never filled
            lengths = fill = [MIN_ROWS] * len(texts) if static else tokens.lengths
        batches = plan_batches(lengths, batch_size, self.batching)
        pad = self.st.tokenizer.pad if padded and not static else None
        forward = {"task": route} if route else {}
        device = self.st.device

        def encode_batch(run: list[int]) -> dict[str, list[np.ndarray]]:
            features = static_collate(tokens, run) if static else collate(tokens, run, pad)
            with torch.inference_mode():
                out = self.st(to_device(features, device), **forward)
            sentence = out["sentence_embedding"]
            if self.st.truncate_dim is not None:  # as the pipeline's encode truncates (Matryoshka; mteb's embed_dim)
                sentence = sentence[..., : self.st.truncate_dim]
            wanted = [sentence] if "sentence" in kinds else []
            if rows and not static:
                if "token_embeddings" not in out:
                    raise TokenVectorsUnavailable(f"{self.model_id!r}: its sentence-transformers modules give no "
                                         "token_embeddings, so it has no token vectors")
                wanted.append(out["token_embeddings"])
            host = to_host(wanted)
            result: dict[str, list[np.ndarray]] = {}
            if "sentence" in kinds:
                result["sentence"] = list(host[0])
            if rows:
                mask = features.get("attention_mask") if padded and not static else None
                aligned = (self._static_rows(tokens, run, prompt) if static
                           else self._direct_rows(tokens, run, host[-1], mask, prompt))
                self._token_kinds(result, aligned, [texts[i] for i in run],
                                  [spans[i] for i in run] if spans is not None else None, kinds, prompt)
                if "pool" in kinds:  # what the pooling reads: special and prompt tokens too, where it reads them
                    result["pool"] = views([pool_rows(self.st, hidden, tokens.shared.get("prompt_length"))
                                            for hidden, _, _ in aligned])
            return result

        yield from stream_batches(batches, kinds, encode_batch, desc, progress, fill, chunk)

    # ---- rows of a directly fed batch --------------------------------------------------------------
    def _direct_rows(self, tokens: Tokens, run: list[int], hidden: np.ndarray, mask: Any, prompt: str
                     ) -> list[tuple[Any, Any, Any]]:
        """Per text: its token vectors without padding, their character offsets, the mask of its own tokens."""
        keep = None if mask is None else numpy_ints(mask).astype(bool)
        return [(hidden[b] if keep is None else hidden[b][keep[b]], tokens.offsets_of(i), tokens.real_of(i, prompt))
                for b, i in enumerate(run)]

    def _static_rows(self, tokens: Tokens, run: list[int], prompt: str) -> list[tuple[Any, Any, Any]]:
        """Per text: its tokens' rows of the embedding matrix (what the model averages into its sentence vector),
        their character offsets and the mask of the text's own tokens."""
        if self._rows_matrix is None:
            self._rows_matrix = static_embedding(self.st).embedding.weight.detach().float().cpu().numpy()
        out = []
        for i in run:
            offsets = tokens.offsets_of(i)
            real = offsets[:, 1] > len(prompt) if prompt else np.ones(tokens.lengths[i], dtype=bool)
            out.append((self._rows_matrix[np.asarray(tokens.columns["input_ids"][i], dtype=np.int64)], offsets, real))
        return out

    def _token_kinds(self, result: dict[str, list[np.ndarray]], aligned: list[tuple[Any, Any, Any]],
                     batch: list[str], spans: Any, kinds: Sequence[str], prompt: str) -> None:
        if "tokens" in kinds:
            result["tokens"] = views([hidden[real] for hidden, _, real in aligned])
        if "span" in kinds:
            import torch  # lazily: torch takes seconds to import

            n = len(prompt)
            result["span"] = [
                span_rows(prompt + text, [(s + n, e + n) for s, e in text_spans], torch.from_numpy(hidden),
                          torch.from_numpy(offsets), torch.from_numpy(real), self.max_length or 0)
                for text, text_spans, (hidden, offsets, real) in zip(batch, spans, aligned, strict=True)]

    # ---- a pipeline run through its own encode, batch by batch -------------------------------------
    def _stream_encode(self, texts: list[str], kinds: Sequence[str], spans: Sequence[Any] | None, batch_size: int,
                       chunk: int | None, progress: bool, desc: str, prompt: str, route: str | None) -> Chunks:
        """Batches of one token length through the SentenceTransformer's ``encode`` (``output_value=None``)."""
        if "pool" in kinds:
            raise TokenVectorsUnavailable(f"{self.model_id!r}: its sentence-transformers pipeline routes texts or "
                                          "reads them in ways iso-bench cannot replay on token vectors (a router, "
                                          "per-task lengths, a chat template), so token-level methods cannot run "
                                          "on it; use -level=sentence")
        encode = {"query": self.st.encode_query, "document": self.st.encode_document}.get(route, self.st.encode)
        if self.batching == PADDED:  # iso-bench 0.1: by character length, padded batches
            lengths, fill = [len(t) for t in texts], None
        else:
            lengths = fill = self._token_lengths(texts, prompt)  # few-row passes filled (MIN_ROWS)
        batches = plan_batches(lengths, batch_size, self.batching)

        def encode_batch(idx: list[int]) -> dict[str, list[np.ndarray]]:
            batch = [texts[i] for i in idx]
            items = encode(batch, prompt=prompt, batch_size=len(batch), output_value=None, show_progress_bar=False)
            result = {"sentence": [as_numpy(item["sentence_embedding"]) for item in items]} if "sentence" in kinds \
                else {}
            if "tokens" in kinds or "span" in kinds:
                self._token_kinds(result, self._align(items, batch, prompt), batch,
                                  [spans[i] for i in idx] if spans is not None else None, kinds, prompt)
            return result

        yield from stream_batches(batches, kinds, encode_batch, desc, progress, fill, chunk)

    def _token_lengths(self, texts: list[str], prompt: str, chunk: int = 4096) -> list[int]:
        """How many tokens the pipeline's own preprocessing gives each ``prompt + text`` (what a batch pads to);
        a pipeline that pads nothing gives one length to all."""
        lengths: list[int] = []
        for start in range(0, len(texts), chunk):
            part = texts[start : start + chunk]
            mask = self.st.preprocess(part, prompt=prompt or None).get("attention_mask")
            if mask is None:  # no padding in this pipeline: any grouping gives the same vectors
                lengths += [MIN_ROWS] * len(part)  # one group, never filled
            else:
                lengths += [int(n) for n in numpy_ints(mask).reshape(len(mask), -1).sum(axis=1)]
        return lengths

    def _align(self, items: list[dict[str, Any]], batch: list[str], prompt: str) -> list[tuple[Any, Any, Any]]:
        """Per text, as numpy arrays: its float32 token vectors without padding, their character offsets in
        ``prompt + text``, and the mask of the text's own tokens (not special, not in the prompt). The offsets
        come from the model's tokenizer, checked token by token against the ids the forward pass ran on."""
        enc = self.st.tokenizer([prompt + t for t in batch], truncation=True, max_length=self.max_length,
                                return_offsets_mapping=True, return_special_tokens_mask=True)
        aligned = []
        for i, item in enumerate(items):
            if "token_embeddings" not in item:
                raise TokenVectorsUnavailable(f"{self.model_id!r}: its sentence-transformers modules give no "
                                     "token_embeddings, so it has no token vectors")
            ids = numpy_ints(item["input_ids"])
            mask = numpy_ints(item["attention_mask"]).astype(bool) if "attention_mask" in item else None
            if mask is not None:
                ids = ids[mask]
            if not np.array_equal(ids, enc["input_ids"][i]):
                raise BackboneError(f"cannot align the token vectors of {self.model_id!r} with its tokenizer's "
                                    f"character offsets (text {batch[i][:60]!r}); its sentence vectors are "
                                    "unaffected, token-level methods and word-level tasks are not possible")
            offsets = np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)
            real = ~np.asarray(enc["special_tokens_mask"][i], dtype=bool)
            if prompt:
                real &= offsets[:, 1] > len(prompt)
            hidden = as_numpy(item["token_embeddings"])
            aligned.append((hidden[mask] if mask is not None else hidden, offsets, real))
        return aligned
