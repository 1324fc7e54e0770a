"""A GPT-2-style decoder made on the spot: random weights from a config (2 layers, 128 dimensions) and a byte-level
BPE tokenizer trained with ``tokenizers`` on the given texts, without a pad token, as GPT-2's has none."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SENTENCES = [
    "A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs run through the snow.",
    "The cat sat on the mat near the window.", "A child rides a red bicycle down the hill.",
    "Stocks fell sharply after the announcement.", "The president spoke to reporters on Tuesday.",
    "A plane is taking off.", "Someone is cutting vegetables in the kitchen.", "It rained all day.",
]


def make_decoder(folder: Path, texts: Sequence[str] = SENTENCES, *, layers: int = 2, dim: int = 128,
                 vocab: int = 400, first_dim: int | None = None, first_value: float = 40.0) -> Path:
    """Save a random GPT-2 (seeded) and its trained tokenizer into ``folder``. With ``first_dim``, the position
    embedding of position 0 holds ``first_value`` in that dimension: a dimension of huge value at the first
    position only, as LLMs carry."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    fast = GPT2TokenizerFast(tokenizer_object=tok, model_max_length=128)
    fast.pad_token = None
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=len(fast), n_positions=128, n_embd=dim, n_layer=layers, n_head=2,
                                 bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id))
    if first_dim is not None:
        with torch.no_grad():
            model.wpe.weight[0, first_dim] = first_value
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
