"""Random-weight stand-ins of three LLM embedders, laid under their real hub ids at mteb's pinned revisions in a
Hugging Face cache folder, so that mteb's own loaders (``InstructSentenceTransformerModel``,
``q3e_instruct_loader``) run them offline as they would run the real models.

- ``Qwen/Qwen3-Embedding-0.6B``: a 1-layer ``Qwen3Model`` saved in bfloat16 (as the real one is), a byte-level BPE
  tokenizer whose post-processor appends ``<|endoftext|>`` (the real one's), last-token pooling, Normalize, and
  the real ``config_sentence_transformers.json`` prompts.
- ``Alibaba-NLP/gte-Qwen2-1.5B-instruct``: a 1-layer ``Qwen2Model`` whose width (96) is neither mteb's declared
  ``embed_dim`` (8,960, the real model's MLP width) nor the real 1,536, a byte-level BPE tokenizer with an EOS
  token that mteb's ``add_eos_token=True`` appends.
- ``intfloat/e5-mistral-7b-instruct``: a 1-layer ``MistralModel`` with a Llama-style tokenizer (BPE with byte
  fallback, ``▁`` for spaces, ``<s>``/``</s>``), as mteb's ``add_eos_token``/``add_bos_token`` settings expect.

The tokenizers are trained here with ``tokenizers`` on a small corpus (the texts given, else a built-in one),
vocabularies of a few thousand at most: a whole cache of the three stays under 2 MB.

Usage:
    python benchmarks/llm_standins.py --cache /tmp/standins                 # lay all three
    python benchmarks/llm_standins.py --cache /tmp/standins --compare STS16 --model Qwen/Qwen3-Embedding-0.6B \\
        --data-dir ../shared/data [--device cuda]                          # iso-bench raw beside mteb.evaluate

``--compare`` lays the stand-in, runs ``iso-bench run --methods raw`` on the task and
``mteb.evaluate(mteb.get_model(id), task)``, and prints both main scores and their difference (the machine's
``HF_HUB_CACHE`` is set to ``--cache`` before mteb or transformers is imported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import iso_bench  # noqa: F401 - before torch: pins the kernels torch and numpy run (iso_bench.kernels)

QWEN3, GTE_QWEN2, E5_MISTRAL = ("Qwen/Qwen3-Embedding-0.6B", "Alibaba-NLP/gte-Qwen2-1.5B-instruct",
                                "intfloat/e5-mistral-7b-instruct")
STANDINS: dict[str, dict[str, Any]] = {
    QWEN3: {"arch": "qwen3", "width": 64, "dtype": "bfloat16", "tokenizer": "qwen", "eos_in_template": True,
            "prompts": {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the "
                                 "query\nQuery:", "document": ""}},
    GTE_QWEN2: {"arch": "qwen2", "width": 96, "dtype": "float32", "tokenizer": "qwen", "eos_in_template": False,
                "prompts": {}},
    E5_MISTRAL: {"arch": "mistral", "width": 80, "dtype": "float32", "tokenizer": "llama", "prompts": {}},
}
"""Per stand-in: its architecture, its width (the sentence vectors' dimension), the dtype its weights are saved
in, its tokenizer's kind and the prompts of its ``config_sentence_transformers.json``."""

CORPUS = ("A man is playing a guitar. A woman slices a cucumber on a board. The cat sat on the mat and looked at "
          "the dog. Instruct: Given a web search query, retrieve relevant passages that answer the query. Query: "
          "Retrieve semantically similar text. Given a claim, find documents that refute the claim. The bank of "
          "the river was muddy; she deposited money at the bank. He played the piano, they play music, playing "
          "well. Classify the intent of the given banking customer query. 0123456789 ,.;:!?'\"()[]{}-_/&%$#@*+=<>")


def training_texts(extra: list[str] | None = None) -> list[str]:
    """The texts the tokenizers learn their merges from: the built-in corpus, then ``extra``."""
    return [CORPUS, *(extra or [])]


def qwen_tokenizer(texts: list[str], vocab_size: int, eos_in_template: bool) -> Any:
    """A Qwen-style byte-level BPE (every byte has a token, so no text is unknown) with ``<|endoftext|>`` as
    EOS and pad, appended to every text by the post-processor where ``eos_in_template`` (Qwen3-Embedding's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[eos, "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    eos_id = tok.token_to_id(eos)
    tok.post_processor = (processors.TemplateProcessing(single=f"$A {eos}", pair=f"$A {eos} $B {eos}",
                                                        special_tokens=[(eos, eos_id)])
                          if eos_in_template else processors.ByteLevel(trim_offsets=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=eos, padding_side="right",
                                   model_max_length=32768)


def llama_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A Llama-style BPE: ``▁`` for spaces (prepended to the first word), byte fallback to ``<0xNN>`` tokens for
    any character it has not learnt, ``<unk>``, ``<s>`` (added in front) and ``</s>`` (added where
    ``add_eos_token`` asks), as ``LlamaTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import LlamaTokenizerFast

    special = ["<unk>", "<s>", "</s>"]
    first = Tokenizer(models.BPE(unk_token="<unk>"))
    first.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    first.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                                         show_progress=False))
    learnt = json.loads(first.to_str())["model"]
    vocab = dict(learnt["vocab"])
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learnt["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.add_special_tokens(special)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return LlamaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                              pad_token="</s>", add_bos_token=True, add_eos_token=False, padding_side="right",
                              model_max_length=32768)


def _config(arch: str, width: int, vocab: int, tokenizer: Any) -> Any:
    import transformers

    common = {"vocab_size": vocab, "hidden_size": width, "intermediate_size": 2 * width, "num_hidden_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32768,
              "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
              "bos_token_id": getattr(tokenizer, "bos_token_id", None)}
    if arch == "qwen3":
        return transformers.Qwen3Config(**common, head_dim=width // 4)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common)
    return transformers.MistralConfig(**common, head_dim=width // 4)


def make_standin(cache: str | Path, model_id: str, texts: list[str] | None = None, vocab_size: int = 1024,
                 seed: int = 0, dtype: str | None = None) -> Path:
    """Lay the stand-in of ``model_id`` (a key of :data:`STANDINS`) into the Hugging Face cache ``cache`` at mteb's
    pinned revision of it; returns its snapshot folder. The same arguments give the same files. ``dtype``
    overrides the dtype its weights are saved in (``"float32"``: a Qwen3 stand-in that runs in float32, where
    mteb's loader does not ask for another)."""
    import mteb
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import AutoModel

    spec = STANDINS[model_id]
    revision = mteb.get_model_meta(model_id).revision
    repo = Path(cache) / f"models--{model_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    corpus = training_texts(texts)
    tokenizer = (qwen_tokenizer(corpus, vocab_size, spec["eos_in_template"]) if spec["tokenizer"] == "qwen"
                 else llama_tokenizer(corpus, vocab_size))
    torch.manual_seed(seed)
    config = _config(spec["arch"], spec["width"], len(tokenizer), tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        model = AutoModel.from_config(config)
        model = model.to(getattr(torch, dtype or spec["dtype"]))
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        transformer = models.Transformer(tmp, model_kwargs={"dtype": "auto"})
        st = SentenceTransformer(modules=[transformer, models.Pooling(spec["width"], pooling_mode="lasttoken"),
                                          models.Normalize()], device="cpu", prompts=spec["prompts"] or None)
        st.save(str(snapshot))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def lay_standins(cache: str | Path, model_ids: list[str] | None = None, texts: list[str] | None = None,
                 dtype: str | None = None) -> dict[str, Path]:
    """:func:`make_standin` for each of ``model_ids`` (default: all three); id -> snapshot folder."""
    return {m: make_standin(cache, m, texts, dtype=dtype) for m in (model_ids or list(STANDINS))}


def compare(model_id: str, task_name: str, data_dir: str, device: str | None, work: Path) -> dict[str, float]:
    """iso-bench's raw main score of ``task_name`` and ``mteb.evaluate``'s on mteb's own loader, both offline."""
    import mteb

    from iso_bench.cli import main as cli
    from iso_bench.data import get_task

    results = work / "results"
    args = ["run", "--model", model_id, "--methods", "raw", "--tasks", task_name, "--results", str(results),
            "--cache-dir", str(work / "cache"), "--data-dir", data_dir, "--no-progress"]
    if cli([*args, *(["--device", device] if device else [])]) != 0:
        raise SystemExit("iso-bench run failed (its message is above)")
    (path,) = results.glob(f"results/*+raw/*/**/{task_name}.json")
    ours = json.loads(path.read_text())["scores"]["test"][0]["main_score"]
    model = mteb.get_model(model_id, device=device) if device else mteb.get_model(model_id)
    result = mteb.evaluate(model, get_task(task_name, data_dir), cache=None, show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]["main_score"]
    return {"iso-bench raw": ours, "mteb.evaluate": theirs, "difference": ours - theirs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True, help="the Hugging Face cache folder to lay the stand-ins in")
    parser.add_argument("--model", action="append", choices=sorted(STANDINS), help="one stand-in (default: all)")
    parser.add_argument("--compare", metavar="TASK", help="compare iso-bench raw with mteb.evaluate on TASK")
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"), help="the datasets' mirror")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: iso-bench's and mteb's)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), help="save the weights in this "
                        "dtype instead of the stand-in's own (Qwen3: bfloat16, the others float32)")
    args = parser.parse_args(argv)
    cache = Path(args.cache).expanduser().resolve()
    os.environ.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                      HF_DATASETS_OFFLINE="1")  # before mteb, transformers or huggingface_hub is imported
    for model_id, folder in lay_standins(cache, args.model, dtype=args.dtype).items():
        print(f"{model_id}: {folder}")
    if args.compare:
        for model_id in args.model or [QWEN3]:
            with tempfile.TemporaryDirectory() as work:
                scores = compare(model_id, args.compare, args.data_dir, args.device, Path(work))
            print(f"{model_id} {args.compare}: " + ", ".join(f"{k} {v:.8f}" for k, v in scores.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
