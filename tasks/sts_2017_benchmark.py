"""STS Benchmark test split (1,379 pairs): the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STSBenchmark",
    size="1,379 test pairs",
    what="STS Benchmark test split (1,379 pairs)",
    citation="""@inproceedings{cer-etal-2017-semeval,
  title = {SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation},
  author = {Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, Inigo and Specia, Lucia},
  booktitle = {Proceedings of SemEval 2017},
  year = {2017},
}""",
    reference="https://aclanthology.org/S17-2001/",
    date=("2017-01-01", "2017-12-31"),
)
