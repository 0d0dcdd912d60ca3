"""Reports over one result: `explain` (text), the summary and exit status, the `evaluate`
JSON document and the what-if report. Pure rendering: no I/O."""
