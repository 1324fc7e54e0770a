"""Isotropy of every variant on the STS-B test sentences (diagnostic; never ranked)."""

from iso_bench.tasks._groups import ISOTROPY

from iso_bench.kinds.cards import TaskCard

CARD = TaskCard(
    name="Isotropy-STSB",
    kind="isotropy",
    suite="isotropy",
    group=ISOTROPY,
    size="2,552 distinct STS-B test sentences and their token vectors",
    # the corpus is an mteb task's data (its hub repository or a mirror copy), loaded through mteb
    params={"corpus_task": "STSBenchmark"},
    metadata=dict(
        description=(
            "Isotropy diagnostics of an encoder's vectors on the STS Benchmark test sentences: I(W) (Mu & "
            "Viswanath 2018), IsoScore (Rudman et al. 2022), average cosine similarity (Ethayarajh 2019) and the "
            "first principal component's share of variance, for sentence vectors and their token vectors."
        ),
        reference="https://arxiv.org/abs/1702.01417",
        type="Clustering",
        main_score="sentence_iw",
        version="b0fddb56ed78048fa8b90373c8a3cfc37b684831",
        domains=("News", "Social", "Web"),
        license="not specified",
        annotations="derived",
        citation="""@inproceedings{mu2018allbutthetop,
  title = {All-but-the-Top: Simple and Effective Postprocessing for Word Representations},
  author = {Mu, Jiaqi and Viswanath, Pramod},
  booktitle = {International Conference on Learning Representations},
  year = {2018},
}""",
    ),
)
