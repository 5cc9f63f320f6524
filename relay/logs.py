"""The gateway's log lines: readable text, or one JSON object a line for a log collector.

Neither ever holds a token or a body: the gateway logs what happened (a request's method, path
without its query string, status and time; a database that went away), never what was sent,
and a signed link's token rides in the query string that is left out.
"""

from __future__ import annotations

import datetime as dt
import json
import logging

LOG_FORMATS = ("text", "json")
# Fields a log call may add (`extra=`) that the JSON line carries.
FIELDS = ("method", "path", "route", "status", "ms", "client")


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message, and the request's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: getattr(record, k) for k in FIELDS if hasattr(record, k)})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(log_format: str = "text") -> None:
    """The root logger at INFO, in the format asked for."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # A line a request in JSON only (a level, not `disabled`, which uvicorn's dictConfig resets).
    logging.getLogger("yui.requests").setLevel(
        logging.INFO if log_format == "json" else logging.WARNING
    )
