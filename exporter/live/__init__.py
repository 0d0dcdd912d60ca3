"""The live exporter: the store of watched objects, the evaluator that keeps one immutable
result up to date, the log of verdict changes, and the wiring of `serve`."""
