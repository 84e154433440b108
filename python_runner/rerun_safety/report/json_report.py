"""report.json: the machine-readable contract of DESIGN.md (models, scenarios, summary)."""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any

from ..results import GamedayReport
from .base import Renderer


def jsonable(value: Any) -> Any:
    """Sample values come from the warehouse: make them valid JSON without losing meaning.

    NaN/inf become null (JSON has no such numbers), decimals become strings (exact), dates and
    timestamps ISO-8601, bytes base64.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return str(value) if value.is_finite() else None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return jsonable(value.item())
        except (TypeError, ValueError):
            pass
    text = str(value)
    return None if text in ("<NA>", "NaT") else text  # pandas missing values


class JsonRenderer(Renderer):
    key = "json"
    filename = "report.json"

    def render(self, report: GamedayReport) -> str:
        return json.dumps(jsonable(report.to_dict()), indent=2, allow_nan=False) + "\n"
