"""Sharded reading (docs/sharding.md): each rank of a job whose fits all span every rank reads only its share of the
training table, the ranks agree on the preprocessing by exchanging summaries, folds come from a hash of each row's
identity, and predictions travel to rank 0 joined by row index. Nothing here gathers rows."""
