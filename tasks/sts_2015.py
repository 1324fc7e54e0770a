"""SemEval-2015 Task 2 English STS test sets (5 subsets, 3,000 scored pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class Sts15Senteval(PaperSTSTask):
    senteval_name = "STS15"
    size_note = "3,000 pairs in 5 subsets"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STS15-SentEval",
        "SemEval-2015 Task 2 English STS test sets (5 subsets, 3,000 scored pairs)",
        citation="""@inproceedings{agirre-etal-2015-semeval,
  title = {SemEval-2015 Task 2: Semantic Textual Similarity, English, Spanish and Pilot on Interpretability},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2015},
  year = {2015},
}""",
        reference="https://aclanthology.org/S15-2045/",
        date=('2015-01-01', '2015-12-31'),
    )
