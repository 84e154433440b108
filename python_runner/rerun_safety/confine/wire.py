"""The confined child's only channel back: JSON lines, each at most MAX_LINE bytes, read into the result
types the command knows and nothing else. JSON cannot carry code (a pickle can: `pickle.loads` runs what
the sender chose), so a child that runs a hostile project can at worst send a wrong report.

Encoded: JSON scalars as they are, lists, tuples as {"$tuple": [...]}, dicts as {"$map": [[k, v], ...]},
the warehouse's values (timestamps, dates, times, decimals, bytes, intervals) tagged, and the frozen
result dataclasses of ALLOWED by name with their fields. Anything else is refused on decoding."""
from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

MAX_LINE = 256 * 1024 * 1024  # a report with its samples is a few MB; past this the answer is refused


class WireError(ValueError):
    """A message from the child that is not one of ours."""


# the result types a child may send, by name: registered by the modules that own them (results.py,
# lint/findings.py, confine/__init__.py), so that this module imports none of them
ALLOWED: dict[str, type] = {}


def register(*types: type) -> None:
    ALLOWED.update({t.__name__: t for t in types})


def _allowed() -> dict[str, type]:
    return ALLOWED


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, (tuple, frozenset, set)):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"$map": [[encode(k), encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and ALLOWED.get(type(value).__name__) is type(value):
        return {"$dc": type(value).__name__,
                "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$timedelta": value.total_seconds()}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return encode(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)


_SCALARS = {
    "$datetime": dt.datetime.fromisoformat, "$date": dt.date.fromisoformat, "$time": dt.time.fromisoformat,
    "$timedelta": lambda s: dt.timedelta(seconds=float(s)), "$decimal": decimal.Decimal,
    "$bytes": lambda s: base64.b64decode(s.encode("ascii")), "$float": float,
}


def decode(value: Any, allowed: dict[str, type] | None = None, text=None) -> Any:
    """The value `encode` made; `text` is applied to every string on the way (the secrets' scrubber)."""
    allowed = ALLOWED if allowed is None else allowed
    if isinstance(value, str):
        return text(value) if text is not None else value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, list):
        return [decode(v, allowed, text) for v in value]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise WireError("not a message of the runner's")
    if "$tuple" in value:
        return tuple(decode(v, allowed, text) for v in _list(value["$tuple"]))
    if "$map" in value:
        return {_hashable(decode(k, allowed, text)): decode(v, allowed, text) for k, v in _list(value["$map"])}
    if "$dc" in value:
        cls = allowed.get(value["$dc"])
        fields = value.get("fields")
        if cls is None or not isinstance(fields, dict):
            raise WireError(f"unknown result type {str(value['$dc'])[:60]!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= names:
            raise WireError(f"unknown fields of {cls.__name__}")
        return cls(**{k: decode(v, allowed, text) for k, v in fields.items()})
    (tag, text), = value.items()
    if tag not in _SCALARS or not isinstance(text, (str, int, float)):
        raise WireError("not a message of the runner's")
    try:
        return _SCALARS[tag](text)
    except (ValueError, TypeError, decimal.InvalidOperation, base64.binascii.Error):
        raise WireError(f"a malformed {tag[1:]}") from None


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise WireError("not a message of the runner's")
    return value


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        raise WireError("a map key that is not a scalar") from None
    return key


def dumps(message: dict) -> bytes:
    return json.dumps(encode(message), allow_nan=False, separators=(",", ":")).encode() + b"\n"


def loads(line: bytes, text=None) -> Any:
    if len(line) > MAX_LINE:
        raise WireError(f"an answer of more than {MAX_LINE // (1024 * 1024)} MB")
    try:
        return decode(json.loads(line), text=text)
    except (ValueError, RecursionError) as err:
        if isinstance(err, WireError):
            raise
        raise WireError("an answer that is not JSON") from None


def scrubbed(value: Any, text) -> Any:
    """`value` (a result of this process's own) with `text` applied to every string: the same path as a
    child's answer takes."""
    return decode(json.loads(json.dumps(encode(value), allow_nan=False)), text=text)
