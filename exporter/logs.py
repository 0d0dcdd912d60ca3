"""structlog setup: JSON lines for machines, a console renderer for people at a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

from exporter.terminal import printable

LogFormat = Literal["json", "console"]


def default_format() -> LogFormat:
    return "console" if sys.stdout.isatty() else "json"


def _printable_values(
    _logger: object, _method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Console lines show cluster strings' control characters as escapes (JSON lines
    escape them already); a traceback keeps its line breaks."""
    return {
        key: printable(value, newlines=key == "exception") if isinstance(value, str) else value
        for key, value in event.items()
    }


def configure_logging(level: str = "info", log_format: LogFormat | None = None) -> None:
    fmt = log_format or default_format()
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            *((_printable_values,) if fmt == "console" else ()),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
