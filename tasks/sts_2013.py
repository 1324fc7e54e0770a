"""*SEM 2013 shared task STS test sets (FNWN, headlines, OnWN; SMT is licensed and absent; 1,500 pairs): the
papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "STS13",
    size="1,500 pairs in 3 subsets",
    what="*SEM 2013 shared task STS test sets (FNWN, headlines, OnWN; SMT is licensed and absent; 1,500 pairs)",
    citation="""@inproceedings{agirre-etal-2013-sem,
  title = {*SEM 2013 shared task: Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor and Guo, Weiwei},
  booktitle = {Proceedings of *SEM 2013},
  year = {2013},
}""",
    reference="https://aclanthology.org/S13-1004/",
    date=("2013-01-01", "2013-12-31"),
)
