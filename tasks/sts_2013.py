"""*SEM 2013 shared task STS test sets (FNWN, headlines, OnWN; SMT is licensed and absent; 1,500 pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class Sts13Senteval(PaperSTSTask):
    senteval_name = "STS13"
    size_note = "1,500 pairs in 3 subsets"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STS13-SentEval",
        "*SEM 2013 shared task STS test sets (FNWN, headlines, OnWN; SMT is licensed and absent; 1,500 pairs)",
        citation="""@inproceedings{agirre-etal-2013-sem,
  title = {*SEM 2013 shared task: Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor and Guo, Weiwei},
  booktitle = {Proceedings of *SEM 2013},
  year = {2013},
}""",
        reference="https://aclanthology.org/S13-1004/",
        date=('2013-01-01', '2013-12-31'),
    )
