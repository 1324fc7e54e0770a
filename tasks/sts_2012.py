"""SemEval-2012 Task 6 STS test sets (MSRpar, MSRvid, SMTeuroparl, OnWN, SMTnews; 3,108 pairs): the papers' STS
protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STS12",
    size="3,108 pairs in 5 subsets",
    what="SemEval-2012 Task 6 STS test sets (MSRpar, MSRvid, SMTeuroparl, OnWN, SMTnews; 3,108 pairs)",
    citation="""@inproceedings{agirre-etal-2012-semeval,
  title = {SemEval-2012 Task 6: A Pilot on Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor},
  booktitle = {Proceedings of *SEM 2012},
  year = {2012},
}""",
    reference="https://aclanthology.org/S12-1051/",
    date=("2012-01-01", "2012-12-31"),
)
