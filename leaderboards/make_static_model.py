"""Make the static version of a sentence-transformers model with model2vec's distillation, offline and
deterministically: the third encoder of the published boards.

    python leaderboards/make_static_model.py -o models/static-all-MiniLM-L6-v2
    iso-bench run --model models/static-all-MiniLM-L6-v2 --methods raw whiten --tasks STSBenchmark

The raw recipe: every token of the base model's vocabulary is encoded alone and its output kept as its row
(model2vec's ``distill`` with ``pca_dims=None`` and ``sif_coefficient=None``: no PCA, no SIF weighting), float32.
A text's vector is then the mean of its tokens' rows, normalised: a static model, strongly anisotropic, where the
seeds' post-processing methods matter.

The folder holds the model as model2vec saves it (``SentenceTransformer(folder)`` loads it as StaticEmbedding +
Normalize, without model2vec installed) and ``iso_bench_recipe.json``: the base model and its revision, the
recipe, and the versions of model2vec, torch and transformers. Two runs give the same bytes on any x86-64 CPU with
AVX2 (one torch thread, seeded, the kernels pinned by ``import iso_bench`` as for a run: the rows are forward
passes of the base model; files written in a fixed order with the usual file mode). The folder's name is in its
README, so the same name gives the same bytes (``models/static-all-MiniLM-L6-v2``, as the boards name it).

model2vec's ``distill`` extra pins transformers below 5.4, which iso-bench's own dependencies exceed; its code
runs with them. Install model2vec and skeletoken without that extra (``pip install 'iso-bench[static]'``), which
leaves the project's transformers as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import iso_bench  # noqa: F401 - first: the kernels pinned (avx2 mode) before torch or numpy compute anything

RECIPE = {"pca_dims": None, "sif_coefficient": None, "quantize_to": "float32", "pooling": "mean",
          "vocabulary": "the base model's own"}


def distill_static(model: str, out: Path, *, revision: str | None = None) -> Path:
    """Distill ``model`` into ``out`` with the raw recipe; returns the folder."""
    from importlib.metadata import version

    import torch
    from model2vec.distill import distill

    torch.set_num_threads(1)  # one reduction order: the same rows on every run
    torch.manual_seed(0)
    static = distill(model, pca_dims=None, sif_coefficient=None, quantize_to="float32", device="cpu")
    out.mkdir(parents=True, exist_ok=True)
    static.save_pretrained(str(out))
    record = {"base_model": model, "base_revision": revision or _revision(model), "recipe": RECIPE,
              "model2vec": version("model2vec"), "torch": torch.__version__, "transformers": version("transformers")}
    (out / "iso_bench_recipe.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    mode = 0o666 & ~_umask()
    for path in out.rglob("*"):
        if path.is_file():
            path.chmod(mode)  # safetensors writes 0600; a shared model folder is readable like any file
    return out


def _revision(model: str) -> str | None:
    from transformers import AutoConfig

    try:
        return getattr(AutoConfig.from_pretrained(model), "_commit_hash", None)
    except Exception:  # noqa: BLE001 - a folder without a commit: its digest identifies it in iso-bench
        return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2", help="the base model")
    parser.add_argument("-o", "--output", required=True, type=Path, help="folder to write (must not exist)")
    args = parser.parse_args(argv)
    if args.output.exists():
        print(f"make_static_model: error: {args.output} exists; give a new folder", file=sys.stderr)
        return 2
    try:
        import model2vec  # noqa: F401
    except ImportError:
        print("make_static_model: error: model2vec is not installed: pip install 'iso-bench[static]'",
              file=sys.stderr)
        return 2
    print(f"wrote {distill_static(args.model, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
