"""SemEval-2016 Task 1 English STS test sets (5 subsets, 1,186 scored pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class Sts16Senteval(PaperSTSTask):
    senteval_name = "STS16"
    size_note = "1,186 pairs in 5 subsets"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STS16-SentEval",
        "SemEval-2016 Task 1 English STS test sets (5 subsets, 1,186 scored pairs)",
        citation="""@inproceedings{agirre-etal-2016-semeval,
  title = {SemEval-2016 Task 1: Semantic Textual Similarity, Monolingual and Cross-Lingual Evaluation},
  author = {Agirre, Eneko and others},
  booktitle = {Proceedings of SemEval 2016},
  year = {2016},
}""",
        reference="https://aclanthology.org/S16-1081/",
        date=('2016-01-01', '2016-12-31'),
    )
