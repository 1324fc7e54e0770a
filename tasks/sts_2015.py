"""SemEval-2015 Task 2 English STS test sets (5 subsets, 3,000 scored pairs): the papers' STS protocol (SentEval
layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STS15",
    size="3,000 pairs in 5 subsets",
    what="SemEval-2015 Task 2 English STS test sets (5 subsets, 3,000 scored pairs)",
    citation="""@inproceedings{agirre-etal-2015-semeval,
  title = {SemEval-2015 Task 2: Semantic Textual Similarity, English, Spanish and Pilot on Interpretability},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2015},
  year = {2015},
}""",
    reference="https://aclanthology.org/S15-2045/",
    date=("2015-01-01", "2015-12-31"),
)
