"""The leaderboard groups the cards share (a group is declared once and referenced by its cards)."""

from iso_bench.kinds.cards import Group

MTEB_STS = Group("mteb-sts", "MTEB STS", "cosine Spearman", order=10, mean="MTEB-STS")
PAPER_STS = Group("paper-sts", "paper STS (SentEval)", "wmean Spearman", order=20, mean="paper-STS")
WORD = Group("word", "word level", "WiC accuracy, WSD-ALL F1", order=30)
ISOTROPY = Group("isotropy", "isotropy diagnostics", "sentence I(W)", order=40, ranked=False)
MTEB_CLASSIFICATION = Group("mteb-classification", "MTEB Classification", "accuracy", order=32)
MTEB_RETRIEVAL = Group("mteb-retrieval", "MTEB Retrieval", "nDCG@10", order=34)
