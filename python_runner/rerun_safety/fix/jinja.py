"""A model file's Jinja as text: its config() calls (read, and settings changed in place), its
is_incremental() branches, bracket matching that skips quotes. Pure text work, no I/O: a change made
here keeps the rest of the file byte for byte."""
from __future__ import annotations

import re

INCREMENTAL_BLOCK = re.compile(r"\{%-?\s*if\s+is_incremental\(\s*\)\s*-?%\}(.*?)\{%-?\s*(?:endif|else|elif)\b",
                               re.S | re.I)
_CONFIG = re.compile(r"\{\{-?\s*config\s*\(")


def close_bracket(text: str, i: int, opening: str = "(", closing: str = ")") -> int:
    """The index of the bracket closing the one just before `i` (quotes skipped); -1 if none."""
    depth, quote = 1, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i if ch == closing else -1
        i += 1
    return -1


def top_items(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Spans of the top-level comma-separated items of text[lo:hi]."""
    spans, depth, quote, start = [], 0, None, lo
    i = lo
    while i < hi:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
        i += 1
    if text[start:hi].strip():
        spans.append((start, hi))
    return spans


def config_calls(raw: str) -> list[tuple[int, int, int]]:
    """Each `{{ config(...) }}`: (start of its args, index of its closing parenthesis, end of `}}`)."""
    out = []
    for m in _CONFIG.finditer(raw):
        close = close_bracket(raw, m.end())
        end = raw.find("}}", close) if close >= 0 else -1
        if close >= 0 and end >= 0 and not raw[close + 1:end].strip("- \t\n"):
            out.append((m.end(), close, end + 2))
    return out


def sets_config(raw: str, settings: dict) -> bool:
    """Any of these keys is set by a config() call of the file (which wins over dbt_project.yml)."""
    return any(setting_span(raw, lo, hi, name) for lo, hi, _ in config_calls(raw) for name in settings)


def literal(value) -> str:
    if isinstance(value, dict):  # a mapping (meta) as Jinja reads it, lists kept lists
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool):  # a count (a microbatch lookback)
        return str(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(literal(v) for v in value) + "]" if len(value) != 1 else literal(value[0])
    return repr(str(value))


def set_config(raw: str, **settings) -> str:
    """The text with these config() settings: changed in place in the model's one config() call, else a
    config() call of their own after the last one (dbt merges the calls, the last winning) or at the top."""
    calls = config_calls(raw)
    if len(calls) == 1:
        lo, hi, _ = calls[0]
        spans = top_items(raw, lo, hi)
        edits: list[tuple[int, int, str]] = []
        missing = []
        for name, value in settings.items():
            found = [(a, b) for a, b in spans if re.match(rf"\s*{re.escape(name)}\s*=", raw[a:b])]
            if found:
                a, b = found[0]
                eq = raw.index("=", a)
                lead = len(raw[eq + 1:b]) - len(raw[eq + 1:b].lstrip())
                trail = len(raw[eq + 1:b]) - len(raw[eq + 1:b].rstrip())
                edits.append((eq + 1 + lead, b - trail, literal(value)))
            else:
                missing.append(f"{name}={literal(value)}")
        if missing:
            last = spans[-1][1] if spans else lo
            tail = raw[spans[-1][0]:last] if spans else ""
            end = last - (len(tail) - len(tail.rstrip()))
            after = raw[end:hi]
            if spans and "\n" in raw[lo:hi]:  # one setting a line: the new ones too, indented alike
                line = raw[spans[-1][0]:end].lstrip("\n")
                indent = line[:len(line) - len(line.lstrip())]
                if after.lstrip().startswith(","):  # a trailing comma: keep it trailing
                    at = end + after.index(",") + 1
                    edits.append((at, at, "".join(f"\n{indent}{m}," for m in missing)))
                else:
                    edits.append((end, end, "".join(f",\n{indent}{m}" for m in missing)))
            else:
                edits.append((end, end, (", " if spans else "") + ", ".join(missing)))
        for a, b, text in sorted(edits, reverse=True):
            raw = raw[:a] + text + raw[b:]
        return raw
    call = "{{ config(" + ", ".join(f"{k}={literal(v)}" for k, v in settings.items()) + ") }}"
    if calls:
        end = calls[-1][2]
        return raw[:end] + "\n" + call + raw[end:]
    return call + "\n" + raw


def setting_span(raw: str, lo: int, hi: int, name: str) -> tuple[int, int] | None:
    """The span of the value of `name=` among the config() call's arguments raw[lo:hi]."""
    for a, b in top_items(raw, lo, hi):
        if re.match(rf"\s*{re.escape(name)}\s*=", raw[a:b]):
            eq = raw.index("=", a)
            value = raw[eq + 1:b]
            return eq + 1 + len(value) - len(value.lstrip()), b - (len(value) - len(value.rstrip()))
    return None
