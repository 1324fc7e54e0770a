"""What the SentEval STS cards share: the data source, suite, group and the wording of the description."""

from iso_bench.tasks._groups import PAPER_STS

from iso_bench.data import RawSource
from iso_bench.kinds.cards import TaskCard

SENTEVAL = RawSource(path="senteval/downstream", archive_dir="senteval", version="senteval",
                     url="https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")


def paper_sts_card(senteval_name: str, *, size: str, what: str, citation: str, reference: str,
                   date: tuple[str, str]) -> TaskCard:
    """The card of ``<senteval_name>-SentEval``: the papers' protocol on the SentEval copy of the data."""
    return TaskCard(
        name=f"{senteval_name}-SentEval",
        kind="paper_sts",
        suite="paper-sts",
        group=PAPER_STS,
        size=size,
        source=SENTEVAL,
        params={"senteval_name": senteval_name},
        metadata=dict(
            description=(f"{what}, SentEval layout, as the isotropy papers evaluate it: cosine of the two sentence "
                         "vectors against the gold similarity; Spearman per subset aggregated as size-weighted mean "
                         "(main score, wmean_spearman) and over all pairs (all_spearman)."),
            reference=reference, type="STS", main_score="wmean_spearman",
            domains=("News", "Web", "Written"), license="not specified", date=date, citation=citation,
        ),
    )
