"""structlog setup: JSON lines for machines, a console renderer for people at a terminal."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["json", "console"]


def default_format() -> LogFormat:
    return "console" if sys.stdout.isatty() else "json"


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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
