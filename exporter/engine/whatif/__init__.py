"""Section 11 of the behaviour: what-if scenarios, endpoint margins, rollout ranges and zone loss.

A scenario changes the engine's inputs (lose a zone, lose nodes, scale a Service); the
ordinary rules then run on the changed cluster. Answers concern the *expected* result,
the state the controller converges to. One module per part, each imported from directly:

- `scenario`: the cluster a scenario changes, and its steps;
- `feasibility`: feasibility per count, endpoint margins, rollout ranges;
- `converged`: the slices and kube-proxy routing once the controller has converged;
- `outcome`: every entry before and after a scenario, and how it changes;
- `zoneloss`: the cluster without each zone, and which entries lose hints with it;
- `forecast`: the live exporter's per-entry margin and zone loss, made once per node view.
"""
