"""Raw vectors from mteb's own implementation of a model: the vectors MTEB evaluates.

For a model that mteb's registry implements, :func:`~iso_bench.backbones.loader.load_backbone` returns an
:class:`MtebBackbone`. ``mteb.get_model(id, revision)`` loads the model with mteb's loader and settings, and
every text is encoded with the prompt that mteb's wrapper gives it for the task and prompt type at hand (e5's
``"query: "`` / ``"passage: "``, bge's retrieval instruction, ...) and with the model's pooling, normalisation
and max length. So the ``raw`` variant equals ``mteb.evaluate(mteb.get_model(id), task)`` by construction.

There are three kinds of implementation:

- **A sentence-transformers wrapper** (mteb's ``SentenceTransformerEncoderWrapper`` whose ``encode`` is not
  overridden). The SentenceTransformer at ``wrapper.model`` is called the way the wrapper calls it
  (``encode_query`` / ``encode_document`` / ``encode``, with the resolved prompt), but with
  ``output_value=None``. So one forward pass gives the sentence vector *and* the token vectors. Spans are read
  from the same pass, using the tokenizer's character offsets.
- **mteb's instruction wrapper** (``InstructSentenceTransformerModel``, a subclass that keeps its ``encode``, or
  what a loader function such as ``q3e_instruct_loader`` returns; decided from the loaded object). Its pipeline is
  run the same way, with the prompt its ``encode`` would pass: the task's instruction from the wrapper's own
  ``get_task_instruction``, none for a document unless ``apply_instruction_to_passages``, then
  sentence-transformers' rule (``None``: the default prompt; ``""``: none). The instruction's tokens are left
  out of the token vectors, as a prompt's are (:meth:`MtebBackbone.instruction`; ``docs/models.md``).
- **Any other implementation** (an API model, a wrapper with its own ``encode``). Its ``encode`` makes the
  sentence vectors. They are cached per task and prompt type, because iso-bench cannot see what the wrapper
  adds. It has no token vectors: asking for them raises :class:`TokenVectorsUnavailable`.

Example:
    >>> bb = MtebBackbone("intfloat/e5-small-v2")                                  # doctest: +SKIP
    >>> bb.prompt_context(mteb.get_task("SciFact").metadata, PromptType.query)     # doctest: +SKIP
    'query: '
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.backbones.base import (  # noqa: F401 - TokenVectorsUnavailable: named here too
    EQUAL_LENGTH,
    KINDS,
    MODEL_OWN,
    BackboneError,
    TokenVectorsUnavailable,
    check_request,
    in_input_order,
)
from iso_bench.backbones.pipeline import (  # noqa: F401 - MtebExtraction, sentence_transformer: named here too
    MtebExtraction,
    as_numpy,
    commit_of,
    extraction_of,
    instructed,
    routes_by_task,
    sentence_transformer,
    static_embedding,
)
from iso_bench.backbones.pool_replay import keeps_space, pools_by_average, replay
from iso_bench.backbones.st_encode import PipelineEncoder

VARIANT_SEPARATOR = "+"  # iso-bench's variants are named "<base>+<method>" (iso_bench.mteb_plugin.SEPARATOR)
ROUTES = ("query", "document")  # the prompt types that sentence-transformers routes to encode_query/_document


def mteb_meta(model_id: str, revision: str | None = None) -> Any | None:
    """mteb's ``ModelMeta`` of ``model_id`` when mteb implements it as a dense text encoder at ``revision``
    (None: mteb's pinned revision); None for a model mteb does not know, another revision, a local folder,
    or an iso-bench variant."""
    if VARIANT_SEPARATOR in model_id or Path(model_id).is_dir():
        return None
    import mteb  # lazily: mteb takes seconds to import

    try:
        meta = mteb.get_model_meta(model_id, revision)
    except (KeyError, ValueError):  # unknown name; a revision other than mteb's
        return None
    usable = (meta.loader is not None and VARIANT_SEPARATOR not in (meta.name or "")
              and "dense" in (meta.model_type or ()) and "text" in (meta.modalities or ()))
    return meta if usable else None


class MtebBackbone:
    """A model run by mteb's own implementation of it; the same interface as
    :class:`~iso_bench.backbones.hf_backbone.Backbone` (:class:`~iso_bench.backbones.base.BackboneProtocol`).

    Args:
        model_id: a name in mteb's model registry.
        revision: None or mteb's pinned revision (another revision is not mteb's implementation).
        device: passed to mteb's loader.
        trust_remote_code: allows an implementation that runs the model repository's own code.
        batch_size: texts per forward pass when the caller does not say.
        model: an implementation already loaded with ``mteb.get_model`` (skips loading).
        meta: mteb's ``ModelMeta`` of the model where already resolved (:func:`~iso_bench.backbones.loader.resolve`).
    """

    def __init__(self, model_id: str, revision: str | None = None, *, device: str | None = None,
                 trust_remote_code: bool = False, batch_size: int = 32, model: Any = None,
                 batching: str = EQUAL_LENGTH, meta: Any = None) -> None:
        if meta is None:
            meta = model.mteb_model_meta if model is not None else mteb_meta(model_id, revision)
        if meta is None:
            raise BackboneError(f"mteb has no implementation of {model_id!r} at revision {revision}; "
                                "iso_bench.backbones.loader.load_backbone uses iso-bench's own backbone for it")
        if (meta.loader_kwargs or {}).get("trust_remote_code") and not trust_remote_code and model is None:
            raise BackboneError(f"mteb's implementation of {meta.name!r} runs code from the model's repository "
                                "(trust_remote_code=True): pass --trust-remote-code to allow it")
        self.model = model if model is not None else _load(meta, device)
        self.st = sentence_transformer(self.model)
        self.instruct = self.st is not None and instructed(self.model)  # mteb's instruction wrapper
        self.model_id = meta.name
        self.revision = meta.revision or commit_of(self.st) or "unknown"
        self.batch_size = batch_size
        self.kinds = KINDS if self.st is not None else ("sentence",)
        # iso-bench groups the texts where it feeds the sentence-transformers pipeline itself; a model mteb runs
        # by its own encode is batched by that code, outside iso-bench's guarantee
        self.extraction = extraction_of(self.model, self.st, meta, batching if self.st is not None else MODEL_OWN)
        self.max_length = self.extraction.max_length
        self._routed = self.st is not None and routes_by_task(self.st)
        self._runner = (PipelineEncoder(self.st, self.model_id, self.max_length, self.extraction.batching)
                        if self.st is not None else None)
        if self.st is not None:
            self.device = str(self.st.device)
            measure = getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension
            self._dim = int(measure())
        else:
            self.device = str(device or getattr(self.model, "device", None) or "cpu")
            self._dim = None  # measured on first use: mteb's embed_dim may not be the width (gte-Qwen2's 8,960)

    @property
    def dim(self) -> int:
        """The sentence vectors' dimension."""
        if self._dim is None:  # a model run by its own encode: measured on one text
            self._dim = len(self.encode(["dimension"], progress=False)["sentence"][0])
        return self._dim

    @property
    def token_dim(self) -> int:
        """The token vectors' width (that of span and pooled rows): the sentence width where no head follows."""
        measure = getattr(self.st[0], "get_embedding_dimension", None) if self.st is not None else None
        return int(measure()) if measure is not None else self.dim

    @property
    def keeps_space(self) -> bool:
        """Whether the pooling and what follows it see token vectors only up to a rotation (no head, no max
        pooling, no truncation: :func:`~iso_bench.backbones.pool_replay.keeps_space`)."""
        return self.st is not None and keeps_space(self.st)

    @property
    def pools_by_average(self) -> bool:
        """Whether the pipeline's pooling averages the rows it reads (mean, weightedmean, cls, lasttoken; a static
        embedding's mean): an affine method may come after it (:func:`~iso_bench.backbones.pool_replay.pools_first`)."""
        return self.st is not None and self._runner.how is not None and pools_by_average(
            self.st, static=self._runner.how == "static")

    def pool(self, rows: Sequence[np.ndarray], *, task_metadata: Any = None, prompt_type: Any = None,
             between: Any = None) -> np.ndarray:
        """Sentence vectors from (transformed) pooled rows (the ``pool`` kind) of texts encoded for
        ``task_metadata`` and ``prompt_type``: the pipeline's own pooling and the modules after it
        (:func:`~iso_bench.backbones.pool_replay.replay`; ``between`` runs on the pooled vectors before them)."""
        if self.st is None or self._runner.how is None:
            list(self.encode_chunks(["x"], kinds=("pool",), progress=False))  # raises: says why it cannot
        prompt = self.resolve_prompt(task_metadata, prompt_type)[0]
        measure = getattr(self.st[0], "_get_prompt_length", None)
        length = measure(prompt) if prompt and measure is not None else None
        return replay(self.st, rows, length, static=self._runner.how == "static", between=between)

    def describe(self) -> dict[str, Any]:
        """What identifies these vectors: ``vectors: "mteb"``, model, revision, and the implementation with
        its prompts (``extraction``)."""
        return {"vectors": "mteb", "model": self.model_id, "revision": self.revision,
                "extraction": self.extraction.to_dict()}

    # ---- prompts ----------------------------------------------------------------------------------
    def resolve_prompt(self, task_metadata: Any = None, prompt_type: Any = None) -> tuple[str, str | None]:
        """``(prompt, route)`` of a sentence-transformers wrapper: the string put before each text, and
        ``"query"`` / ``"document"`` / None for ``encode_query`` / ``encode_document`` / ``encode``.

        This resolves the prompt the way mteb's wrapper does (``get_prompt_name``, then its prompt
        dictionary). When that finds none, it falls back the way sentence-transformers does: the model's
        own ``"query"`` / ``"document"`` prompt, then its default prompt. With no task, only that fallback
        applies.
        """
        from mteb.models.abs_encoder import get_prompt_name  # lazily: mteb takes seconds to import

        if self.instruct:
            return self.instruction(task_metadata, prompt_type), None
        route = _prompt_type_value(prompt_type)
        route = route if route in ROUTES else None
        prompt = None
        prompts = getattr(self.model, "model_prompts", None)
        if task_metadata is not None and prompts:
            name = get_prompt_name(prompts, task_metadata, _as_prompt_type(prompt_type))
            prompt = prompts.get(name) if name else None
        if prompt is None and self.st is not None:
            own = self.st.prompts or {}
            if route is not None and route in own:
                prompt = own[route]
            elif self.st.default_prompt_name is not None:
                prompt = own.get(self.st.default_prompt_name)
        return prompt or "", route

    def instruction(self, task_metadata: Any = None, prompt_type: Any = None) -> str:
        """The prompt mteb's instruction wrapper puts before each text, as its ``encode`` resolves it: the task's
        instruction through the wrapper's own ``get_task_instruction`` (its prompts, template and priorities),
        none for a document unless ``apply_instruction_to_passages``; then sentence-transformers' rule for the
        ``prompt=`` it is given: ``None`` falls back to the pipeline's default prompt, ``""`` is no prompt. Texts
        of no task (a fit corpus file, held-out sources) are resolved as a task that names no instruction."""
        kind = _as_prompt_type(prompt_type)
        log = logging.getLogger("mteb.abstasks.abstask")  # its warning that a task's class has no prompt (WiC's)
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                task = task_metadata if task_metadata is not None else _no_task()
                instruction: str | None = self.model.get_task_instruction(task, kind)
        finally:
            log.setLevel(level)
        if not self.model.apply_instruction_to_passages and kind is not None and kind.value == "document":
            instruction = None
        if instruction is None and self.st.default_prompt_name is not None:
            instruction = (self.st.prompts or {}).get(self.st.default_prompt_name)
        return instruction or ""

    def prompt_context(self, task_metadata: Any = None, prompt_type: Any = None) -> str | None:
        """The part of a text's cache key that the task and prompt type decide.

        For a sentence-transformers wrapper this is the resolved prompt string (None when empty), plus the
        route when the model routes queries and documents differently. For any other implementation it is
        the task name and prompt type.
        """
        if self.st is None:
            if task_metadata is None and prompt_type is None:
                return None
            return f"mteb-task:{getattr(task_metadata, 'name', '')}:{_prompt_type_value(prompt_type) or ''}"
        prompt, route = self.resolve_prompt(task_metadata, prompt_type)
        if self._routed and route is not None:
            return f"{prompt}\x00route:{route}"
        return prompt or None

    # ---- encoding ---------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, kinds: Sequence[str] = ("sentence",),
               spans: Sequence[Sequence[tuple[int, int]]] | None = None, batch_size: int | None = None,
               progress: bool = True, desc: str = "encoding", task_metadata: Any = None,
               prompt_type: Any = None) -> dict[str, list[np.ndarray]]:
        """Encode ``texts`` with the prompt for ``task_metadata`` and ``prompt_type``: per requested kind, one
        array per text, in input order (shapes as :meth:`iso_bench.backbones.hf_backbone.Backbone.encode`). Token and
        span vectors cover the text's own tokens only: no special tokens and no prompt tokens."""
        chunks = self.encode_chunks(texts, kinds=kinds, spans=spans, batch_size=batch_size, progress=progress,
                                    desc=desc, task_metadata=task_metadata, prompt_type=prompt_type)
        return in_input_order(len(texts), kinds, chunks)

    def encode_chunks(self, texts: Sequence[str], *, kinds: Sequence[str] = ("sentence",),
                      spans: Sequence[Sequence[tuple[int, int]]] | None = None, batch_size: int | None = None,
                      chunk: int | None = None, progress: bool = True, desc: str = "encoding",
                      task_metadata: Any = None, prompt_type: Any = None
                      ) -> Iterator[tuple[list[int], dict[str, list[np.ndarray]]]]:
        """:meth:`encode` as ``(indices, rows per kind)`` every ``chunk`` texts (None: all at once) of one batch
        plan over all of ``texts``: the store writes each chunk as it comes."""
        check_request(texts, kinds, spans)
        unable = [k for k in kinds if k not in self.kinds]
        if unable:
            raise TokenVectorsUnavailable(
                f"{self.model_id!r} has no token vectors: mteb's implementation of it "
                f"({self.extraction.implementation}) gives sentence vectors only. Token-level methods "
                "(cluster-pca, -level=token) and word-level tasks (WiC, WSD) need a model with hidden "
                "states. Use a sentence-transformers model, or pass --pooling/--layer to run iso-bench's "
                "own backbone on the model's weights.")
        batch_size = batch_size or self.batch_size
        texts = list(texts)
        if not texts:
            return
        if self.st is None:
            step = chunk or len(texts)
            for start in range(0, len(texts), step):
                part = texts[start : start + step]
                yield (list(range(start, start + len(part))),
                       {"sentence": self._encode_wrapper(part, batch_size, progress, task_metadata, prompt_type)})
            return
        prompt, route = self.resolve_prompt(task_metadata, prompt_type)
        yield from self._runner.stream(texts, kinds, spans, batch_size, chunk, progress, desc, prompt, route)

    def token_ids(self, texts: Sequence[str], *, task_metadata: Any = None, prompt_type: Any = None
                  ) -> list[np.ndarray]:
        """The tokenizer id of each token vector of ``texts`` (the rows of its ``tokens``): per text, the
        ids of its own tokens, after the prompt, without special tokens (:meth:`_align`'s selection)."""
        if self.st is None:
            raise TokenVectorsUnavailable(f"{self.model_id!r}: mteb runs it without a sentence-transformers "
                                          "tokenizer, so its token vectors have no token types")
        prompt = self.resolve_prompt(task_metadata, prompt_type)[0]
        module = static_embedding(self.st)
        if module is not None:
            encodings = module.tokenizer.encode_batch([prompt + t for t in texts], add_special_tokens=False)
            return [np.asarray(e.ids, dtype=np.int64)[np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)[:, 1]
                                                      > len(prompt)] if prompt else np.asarray(e.ids, dtype=np.int64)
                    for e in encodings]
        enc = self.st.tokenizer([prompt + t for t in texts], truncation=True, max_length=self.max_length,
                                return_offsets_mapping=True, return_special_tokens_mask=True)
        out = []
        for ids, special, offsets in zip(enc["input_ids"], enc["special_tokens_mask"], enc["offset_mapping"],
                                         strict=True):
            real = ~np.asarray(special, dtype=bool)
            if prompt:
                real &= np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[:, 1] > len(prompt)
            out.append(np.asarray(ids, dtype=np.int64)[real])
        return out

    def _encode_wrapper(self, texts: list[str], batch_size: int, progress: bool, task_metadata: Any,
                        prompt_type: Any) -> list[np.ndarray]:
        """Sentence vectors from the implementation's own ``encode``, fed as mteb feeds it: a DataLoader of
        ``{"text": [...]}`` batches, the task's metadata and the prompt type."""
        from datasets import Dataset  # lazily: datasets loads pyarrow
        from torch.utils.data import DataLoader  # lazily: torch takes seconds to import

        if not texts:
            return []
        loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=batch_size)
        vectors = self.model.encode(loader, task_metadata=task_metadata if task_metadata is not None else _no_task(),
                                    hf_split="test", hf_subset="default", prompt_type=_as_prompt_type(prompt_type),
                                    batch_size=batch_size, show_progress_bar=progress)
        matrix = as_numpy(vectors)
        if matrix.shape[0] != len(texts):
            raise BackboneError(f"{self.model_id!r}: mteb's implementation returned {matrix.shape[0]} vectors "
                                f"for {len(texts)} texts")
        return list(matrix.reshape(len(texts), -1))


# ---- helpers ---------------------------------------------------------------------------------------
def _load(meta: Any, device: str | None) -> Any:
    """``mteb.get_model`` with an error that names the model and what to do."""
    import mteb  # lazily: mteb takes seconds to import

    try:
        return mteb.get_model(meta.name, meta.revision, device=device)
    except (OSError, ValueError) as exc:
        hint = ("HF_HUB_OFFLINE=1 is set: put the model into the Hugging Face cache first (HF_HUB_CACHE)"
                if os.environ.get("HF_HUB_OFFLINE") == "1" else "check the id, the revision and the network")
        reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
        raise BackboneError(f"cannot load mteb's implementation of {meta.name!r} (revision {meta.revision}): "
                            f"{reason}. {hint}") from exc


def _prompt_type_value(prompt_type: Any) -> str | None:
    return None if prompt_type is None else str(getattr(prompt_type, "value", prompt_type))


def _as_prompt_type(prompt_type: Any) -> Any:
    from mteb.types import PromptType  # lazily: mteb takes seconds to import

    return None if prompt_type is None else PromptType(_prompt_type_value(prompt_type))


def _no_task() -> Any:
    """Metadata for texts encoded outside any task (no task name or type matches a prompt)."""
    from mteb.abstasks.task_metadata import TaskMetadata  # lazily: mteb takes seconds to import

    return TaskMetadata.model_construct(name="iso-bench/no-task", type=None, modalities=["text"])


