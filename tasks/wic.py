"""WiC: the Word-in-Context dataset (Pilehvar & Camacho-Collados, NAACL 2019), scored without training."""

from iso_bench.tasks._groups import WORD

from iso_bench.data import RawSource
from iso_bench.kinds.cards import TaskCard

CARD = TaskCard(
    held_out="train",  # the held-out setting fits on its training split
    name="WiC",
    kind="wic",
    suite="word",
    group=WORD,
    size="train 5,428 (threshold), dev 638, test 1,400 pairs",
    splits=("test",),
    source=RawSource(path="wic/WiC_dataset", archive_dir="wic/WiC_dataset", version="1.0",
                     url="https://pilehvar.github.io/wic/package/WiC_dataset.zip"),
    params={"threshold_split": "train", "scored_splits": ("dev", "test")},
    metadata=dict(
        description=(
            "Word-in-Context: does a target word have the same sense in two sentences? Without training: the "
            "cosine of the two target-word vectors (sub-token mean of the word's span), a threshold chosen on "
            "train, accuracy on test (main score) and dev (accuracy_dev). Chance is 50%."
        ),
        reference="https://pilehvar.github.io/wic/",
        type="PairClassification",
        main_score="accuracy",
        domains=("Written", "Encyclopaedic"),
        license="cc-by-nc-4.0",
        citation="""@inproceedings{pilehvar-camacho-collados-2019-wic,
  title = {{W}i{C}: the Word-in-Context Dataset for Evaluating Context-Sensitive Meaning Representations},
  author = {Pilehvar, Mohammad Taher and Camacho-Collados, Jose},
  booktitle = {Proceedings of NAACL-HLT 2019},
  year = {2019},
  pages = {1267--1273},
}""",
    ),
)
