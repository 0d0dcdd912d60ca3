"""Process-wide settings every command applies once at start."""

from __future__ import annotations

import ctypes
import gc


def tune_garbage_collector() -> None:
    """Collect the young generation every 50,000 allocations instead of every 700.

    Decoding a large list allocates millions of acyclic objects (freed by reference
    counting, never by the cyclic collector); at the default threshold the collector
    rescans them hundreds of times and decoding 150,000 endpoints takes 10x longer.
    """
    gc.set_threshold(50_000, 20, 100)


def pause_collector() -> None:
    """Stop the cyclic collector while a start decodes and evaluates its first snapshot.

    Nearly everything a start allocates is either the cluster it keeps (Nodes, Services,
    150,000 endpoints and their verdicts at 5,000 nodes) or acyclic temporaries that
    reference counting frees; the collector finds no garbage in them, yet at scale 1 it
    rescanned them for 0.3 s of a 2.8 s live start (40 young and one middle collection).
    """
    gc.disable()


def resume_collector(*, freeze: bool = True) -> None:
    """Collect again; with `freeze`, without ever rescanning what the start built (it lives
    as long as the process): whatever is alive now is moved out of the generations first."""
    if freeze:
        gc.freeze()
    gc.enable()


def release_free_memory() -> None:
    """Give the C heap's free pages back to the operating system (glibc's malloc_trim).

    A sync decodes a cluster's LIST pages (143 MB of JSON at 5,000 nodes): their buffers
    are freed once decoded, but glibc keeps freed heap pages mapped, so they would stay
    in the resident size for the life of the process. A no-op without glibc.
    """
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
