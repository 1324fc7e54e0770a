"""MTEB's own tasks beyond STS whose data the shared folder holds: Banking77Classification (classification,
accuracy of a logistic regression on the training split's vectors) and SciFact (retrieval, nDCG@10). mteb
defines and scores them; the cards place them in the suite and the leaderboard, one group per task type."""

from iso_bench.tasks._groups import MTEB_CLASSIFICATION, MTEB_RETRIEVAL

from iso_bench.kinds.cards import TaskCard

CARDS = [
    TaskCard(name="Banking77Classification", kind="mteb", suite="mteb-classification", group=MTEB_CLASSIFICATION,
             size="3,080 test texts, train 10,003; 77 intents", held_out="train", metric="accuracy"),
    TaskCard(name="SciFact", kind="mteb", suite="mteb-retrieval", group=MTEB_RETRIEVAL,
             size="300 test queries, 5,183 documents", metric="nDCG@10"),
]
