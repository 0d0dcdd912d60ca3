"""The HTTP edge: the bounded, non-blocking server and its TLS/basic-auth web config."""
