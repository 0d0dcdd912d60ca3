"""One log line for a request that failed inside the server: what failed, and where.

A bug reached by a request (a handler, content negotiation, the app's own headers) must
cost that request a 500, and the operator one structured line saying which exception at
which frames: not a traceback of thirty lines a console prints for each scrape of a
misbehaving client, nor a silent dropped connection. The frames are `module:line` pairs,
innermost last, enough to find the code.
"""

from __future__ import annotations

import traceback

import structlog

logger = structlog.get_logger("exporter.http")

# A message longer than this is cut: it may repeat what the client sent.
MESSAGE_LIMIT = 300
# The innermost frames named in the line.
FRAMES = 6


def _where(error: BaseException) -> list[str]:
    frames = traceback.extract_tb(error.__traceback__)[-FRAMES:]
    return [f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}:{frame.name}" for frame in frames]


def log_failure(event: str, error: BaseException, **context: object) -> None:
    """Log `event` at error level, once, with the exception's type, message and frames."""
    message = str(error)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + "..."
    logger.error(
        event,
        error=f"{type(error).__name__}: {message}" if message else type(error).__name__,
        frames=_where(error),
        **context,
    )
