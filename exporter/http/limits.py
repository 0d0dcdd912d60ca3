"""What the HTTP server bounds: connections, threads, sizes, timeouts, slots and queues."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds on the HTTP server's connections, workers, request sizes and timeouts: what a slow
    or hostile client can hold."""

    max_connections: int = 1000
    workers: int = 4
    probe_workers: int = 2
    max_header_bytes: int = 16 * 1024
    max_body_bytes: int = 64 * 1024
    handshake_timeout: float = 10.0
    # From a request's first byte to its last.
    request_timeout: float = 10.0
    # A kept-alive connection waiting for its next request (Prometheus reuses connections
    # between scrapes; an idle one is also the first closed when connections run short).
    idle_timeout: float = 60.0
    # Writing a response may stall this long without progress.
    write_timeout: float = 30.0
    # The kernel caps it at net.core.somaxconn (4096 since Linux 5.4): many scrapers
    # connecting at once must not wait for a SYN retransmit.
    backlog: int = 4096
    # Scrapes (SCRAPE_PATHS) answered at once, each from the app call to its last byte
    # written: one that never reads holds its slot until write_timeout. A slot costs a
    # reference to a rendered body and at most one write batch (WRITE_BATCH) of copies.
    max_scrapes: int = 16
    # Of those, the ones the app calls expensive (prometheus_client renders the whole
    # registry anew, ~7x the cached body's time, into a private copy of the body).
    max_expensive_scrapes: int = 1
    # Threads that check credentials seen for the first time (bcrypt, tens of ms each by
    # design), apart from every other pool: a wrong-password flood waits here, not probes.
    auth_workers: int = 1
    # Requests waiting for one of the slots above: beyond `max_queued` per kind, or after
    # `queue_timeout` of waiting, the answer is 503 with Retry-After.
    max_queued: int = 64
    queue_timeout: float = 10.0
    # While a request waits for a scrape slot, a scrape that has waited this long for its
    # client to read gives its slot up (closed, as the oldest idle connection is): clients
    # that never read cannot keep Prometheus out for write_timeout.
    stall_grace: float = 1.0
