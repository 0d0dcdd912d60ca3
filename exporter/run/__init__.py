"""The pipeline run: for ever (`serve`: informers, evaluator, renderers and the HTTP server
wired together) or once for a command (`oneshot`: a snapshot or LIST written into a store
and stepped)."""
