"""The evaluator: it takes a store's changes, re-judges what they touch with the engine and
publishes one immutable result per step; its incremental policy and the verdict-change log."""
