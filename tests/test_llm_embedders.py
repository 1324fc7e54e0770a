"""LLM embedders run whole through mteb's own loaders, offline, on random-weight stand-ins laid under their real
ids and pinned revisions (``benchmarks/llm_standins.py``): Qwen3-Embedding-0.6B in bfloat16 by
``q3e_instruct_loader``, gte-Qwen2-1.5B-instruct (96-d, not the 8,960 mteb declares) and e5-mistral-7b-instruct
(a Llama-style tokenizer) by ``InstructSentenceTransformerModel``."""

from __future__ import annotations

from pathlib import Path

QWEN3, GTE_QWEN2, E5_MISTRAL = ("Qwen/Qwen3-Embedding-0.6B", "Alibaba-NLP/gte-Qwen2-1.5B-instruct",
                                "intfloat/e5-mistral-7b-instruct")


def test_mtebs_own_loaders_run_the_standins_as_the_real_models(standin_hub: Path) -> None:
    import mteb
    import torch
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    found = {}
    for model_id in (QWEN3, GTE_QWEN2, E5_MISTRAL):
        model = mteb.get_model(model_id)
        assert isinstance(model, InstructSentenceTransformerModel)
        tok = model.model.tokenizer
        ids = tok(["A man is playing a guitar."])["input_ids"][0]
        found[model_id] = (next(model.model.parameters()).dtype, model.model.get_sentence_embedding_dimension(),
                           tok.convert_ids_to_tokens(ids[:1] + ids[-1:]))
    assert found[QWEN3] == (torch.bfloat16, 64, ["A", "<|endoftext|>"])  # its tokenizer's own EOS
    assert found[GTE_QWEN2] == (torch.float16, 96, ["A", "<|endoftext|>"])  # mteb's add_eos_token; dtype=float16
    assert found[E5_MISTRAL] == (torch.float16, 80, ["<s>", "</s>"])  # add_bos_token and add_eos_token
