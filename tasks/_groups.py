"""The leaderboard groups the cards share (a group is declared once and referenced by its cards)."""

from iso_bench.kinds.cards import Group, group_of_type

MTEB_STS = Group("mteb-sts", "MTEB STS", "cosine Spearman", order=10, mean="MTEB-STS")
PAPER_STS = Group("paper-sts", "paper STS (SentEval)", "wmean Spearman", order=20, mean="paper-STS")
WORD = Group("word", "word level", "WiC accuracy, WSD-ALL F1", order=30)
ISOTROPY = Group("isotropy", "isotropy diagnostics", "sentence I(W)", order=40, ranked=False)
# MTEB's own tasks of other types: the very groups a task without a card gets (group_of_type), so that a carded
# Banking77Classification and an uncarded EmotionClassification share one table
MTEB_CLASSIFICATION = group_of_type("Classification")
MTEB_RETRIEVAL = group_of_type("Retrieval")
