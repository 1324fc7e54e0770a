"""SemEval-2014 Task 10 English STS test sets (6 subsets, 3,750 pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class Sts14Senteval(PaperSTSTask):
    senteval_name = "STS14"
    size_note = "3,750 pairs in 6 subsets"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STS14-SentEval",
        "SemEval-2014 Task 10 English STS test sets (6 subsets, 3,750 pairs)",
        citation="""@inproceedings{agirre-etal-2014-semeval,
  title = {SemEval-2014 Task 10: Multilingual Semantic Textual Similarity},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2014},
  year = {2014},
}""",
        reference="https://aclanthology.org/S14-2010/",
        date=('2014-01-01', '2014-12-31'),
    )
