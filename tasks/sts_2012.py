"""SemEval-2012 Task 6 STS test sets (MSRpar, MSRvid, SMTeuroparl, OnWN, SMTnews; 3,108 pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class Sts12Senteval(PaperSTSTask):
    senteval_name = "STS12"
    size_note = "3,108 pairs in 5 subsets"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STS12-SentEval",
        "SemEval-2012 Task 6 STS test sets (MSRpar, MSRvid, SMTeuroparl, OnWN, SMTnews; 3,108 pairs)",
        citation="""@inproceedings{agirre-etal-2012-semeval,
  title = {SemEval-2012 Task 6: A Pilot on Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor},
  booktitle = {Proceedings of *SEM 2012},
  year = {2012},
}""",
        reference="https://aclanthology.org/S12-1051/",
        date=('2012-01-01', '2012-12-31'),
    )
