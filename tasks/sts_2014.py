"""SemEval-2014 Task 10 English STS test sets (6 subsets, 3,750 pairs): the papers' STS protocol (SentEval
layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STS14",
    size="3,750 pairs in 6 subsets",
    what="SemEval-2014 Task 10 English STS test sets (6 subsets, 3,750 pairs)",
    citation="""@inproceedings{agirre-etal-2014-semeval,
  title = {SemEval-2014 Task 10: Multilingual Semantic Textual Similarity},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2014},
  year = {2014},
}""",
    reference="https://aclanthology.org/S14-2010/",
    date=("2014-01-01", "2014-12-31"),
)
