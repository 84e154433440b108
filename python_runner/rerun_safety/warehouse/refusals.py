"""What a failed statement's message says was refused, typed: the engines' (and the kernel's, through each
engine's client) words for a write outside the sandbox, a privilege the game day's role lacks, a file the
sandbox would not open. Each engine's dialect knows its own words (`Dialect.refusal_words`); the game day
asks `registry.refusals(message)` and never reads an engine's error text itself."""
from __future__ import annotations

import re
from dataclasses import dataclass

# the kernel refusing a write outside the run folder (confine/): words for EACCES (Landlock) and EROFS (the
# confined namespace's read-only mounts, which answer first). Reading is never refused there: this is a write.
DENIED = r"(?:Permission denied|Read-only file system)"

KERNEL = "kernel"  # the kernel refused a write outside the run folder: `path`
ROLE = "role"  # the game day's database role may not do it: `text`
SANDBOX_FILE = "sandbox_file"  # the sandbox refused a file: `path`; `engine_setting`: by the engine's own setting


@dataclass(frozen=True)
class Refusal:
    kind: str
    text: str  # the refusal as the engine said it
    path: str = ""
    engine_setting: bool = False  # (sandbox_file) the engine's file-system setting, not a statement rewrite


# Python's own words (a Python model, a plug-in): every engine runs them
PYTHON_WORDS = ((KERNEL, re.compile(rf"{DENIED}: '([^'\n]*)'"), False),)


def find(message: str, vocabularies) -> list[Refusal]:
    """Every kind of refusal the message holds in these words (each engine's `refusal_words`, and
    Python's), at most one each, in the order kernel, role, sandbox file (for each kind the earliest in
    the message, whichever engine words it). registry.refusals asks every engine's."""
    found: dict[str, tuple[int, Refusal]] = {}
    for words in [PYTHON_WORDS, *vocabularies]:
        for kind, regex, setting in words:
            m = regex.search(message or "")
            if m is not None and (kind not in found or m.start() < found[kind][0]):
                path = next((g for g in m.groups() if g), "")
                text = m.group(0).strip() if kind == ROLE else m.group(0)
                found[kind] = (m.start(), Refusal(kind, text, path, setting))
    return [found[k][1] for k in (KERNEL, ROLE, SANDBOX_FILE) if k in found]
