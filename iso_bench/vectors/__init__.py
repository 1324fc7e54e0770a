"""Raw vectors on disk: shard files read in place (:mod:`.shards`) and the index from a text's key to its rows
(:mod:`.index`); :mod:`iso_bench.vectors.store` builds the store of a backbone on them."""
