"""SICK relatedness, SentEval test split (4,927 pairs; MTEB's SICK-R uses all 9,927): the papers' STS protocol
(SentEval layout, "all" and "wmean")."""

from iso_bench.tasks._paper_sts import paper_sts_card

CARD = paper_sts_card(
    "SICK-R",
    size="4,927 test pairs",
    what="SICK relatedness, SentEval test split (4,927 pairs; MTEB's SICK-R uses all 9,927)",
    citation="""@inproceedings{marelli-etal-2014-sick,
  title = {A SICK cure for the evaluation of compositional distributional semantic models},
  author = {Marelli, Marco and Menini, Stefano and Baroni, Marco and Bentivogli, Luisa
            and Bernardi, Raffaella and Zamparelli, Roberto},
  booktitle = {Proceedings of LREC 2014},
  year = {2014},
}""",
    reference="https://aclanthology.org/L14-1314/",
    date=("2014-01-01", "2014-12-31"),
)
