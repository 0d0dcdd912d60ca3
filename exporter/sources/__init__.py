"""Where cluster objects come from: the Kubernetes API (list/watch) or a snapshot file."""
