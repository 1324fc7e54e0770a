"""MTEB's own seven English STS tasks (cosine Spearman, subsets pooled): the default suite. mteb defines
and scores them; these cards only place them in the suite and the leaderboard, so that ``iso-bench list``
knows them without importing mteb. Sizes are the test pairs of mteb's descriptive statistics."""

from iso_bench.tasks._groups import MTEB_STS

from iso_bench.kinds.cards import TaskCard

_SIZES = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379,
          "SICK-R": 9927}

_TRAIN = {"STSBenchmark": 5749}  # the datasets with a training split (the held-out setting fits on it)

CARDS = [TaskCard(name=name, kind="mteb", suite="mteb-sts", group=MTEB_STS,
                  size=f"{n:,} test pairs" + (f", train {_TRAIN[name]:,}" if name in _TRAIN else ""),
                  held_out="train" if name in _TRAIN else "semcor")
         for name, n in _SIZES.items()]
