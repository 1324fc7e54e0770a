"""SemEval-2016 Task 1 English STS test sets (5 subsets, 1,186 scored pairs): the papers' STS protocol (SentEval
layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STS16",
    size="1,186 pairs in 5 subsets",
    what="SemEval-2016 Task 1 English STS test sets (5 subsets, 1,186 scored pairs)",
    citation="""@inproceedings{agirre-etal-2016-semeval,
  title = {SemEval-2016 Task 1: Semantic Textual Similarity, Monolingual and Cross-Lingual Evaluation},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2016},
  year = {2016},
}""",
    reference="https://aclanthology.org/S16-1081/",
    date=("2016-01-01", "2016-12-31"),
)
