"""STS Benchmark test split (1,379 pairs):
the papers' STS protocol (SentEval layout, "all" and "wmean")."""

from iso_bench.kinds import RawSource
from iso_bench.kinds.paper_sts import PaperSTSTask, paper_sts_card


class StsbenchmarkSenteval(PaperSTSTask):
    senteval_name = "STSBenchmark"
    size_note = "1,379 test pairs"
    source = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                       url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    metadata = paper_sts_card(
        "STSBenchmark-SentEval",
        "STS Benchmark test split (1,379 pairs)",
        citation="""@inproceedings{cer-etal-2017-semeval,
  title = {SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation},
  author = {Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, Inigo and Specia, Lucia},
  booktitle = {Proceedings of SemEval 2017},
  year = {2017},
}""",
        reference="https://aclanthology.org/S17-2001/",
        date=('2017-01-01', '2017-12-31'),
    )
