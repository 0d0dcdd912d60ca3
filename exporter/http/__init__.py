"""The HTTP edge: the bounded, non-blocking server (`server` and its parts) and its
TLS/basic-auth web config (`webconfig`)."""
