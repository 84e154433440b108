"""The game day's options, checked before any work (a bad option exits 2 with one line)."""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..warehouse.base import default_work_root
from .scenarios import ALL_SCENARIOS, DEFAULT_SCENARIOS, Batch, replayed, with_baseline


def _timestamp_option(value: Any, option: str) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    try:
        parsed = dt.datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise ConfigError(f"{option} '{value}' is not a date or timestamp (use ISO-8601, e.g. 2026-03-01 "
                          "or 2026-03-01T06:00)") from None
    return parsed.astimezone(dt.timezone.utc).replace(tzinfo=None) if parsed.tzinfo else parsed


def default_threads() -> int:
    """Worker processes for the scenarios when --threads is not given: one per CPU, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class GamedayOptions:
    project_dir: Path
    profiles_dir: str | None
    target: str | None
    select: tuple[str, ...]
    exclude: tuple[str, ...]
    vars_yaml: str | None
    steps: int
    scenarios: tuple[str, ...]
    output_dir: Path
    threads: int = 1
    keep_sandboxes: bool = False
    work_root: Path = field(default_factory=default_work_root)
    batch_size: Batch = field(default_factory=lambda: Batch.parse("day"))
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    float_tolerance: float | None = None
    # `late` for inputs without a load time: the share of rows that arrive late (0: none, so only
    # inputs with a load time arrive late), and by how much (None: two batches)
    late_fraction: float = 0.0
    late_by: Batch | None = None
    state: str | None = None
    # --baseline: model name -> verdict in an earlier report (e.g. main's); only models that got
    # worse than there make the run fail
    baseline: dict[str, str] | None = None
    # how the project's code was confined (confine.Confinement), first among the reports' notes; None:
    # the game day runs in this process as it is (the library's callers and tests of its parts)
    confinement: Any = None
    # --fix: after the game day, try candidate fixes of each root cause in sandboxes (see fix/)
    fix: bool = False
    # keep each reference output's fingerprint (diff.fingerprint): what a verified fix must not change
    fingerprints: bool = False
    # a fix's verifying game day of the models below a root cause: they may keep no state (a table made
    # nondeterministic by ties), as the first game day judged them beside the incremental models it replayed
    verifying: bool = False
    # PostgreSQL: no sandbox may grow past this many bytes (warehouse/postgres/budget.py)
    max_sandbox_size: int = 10 * 1000 ** 3

    @classmethod
    def build(cls, *, project_dir, profiles_dir=None, target=None, select=(), exclude=(), vars_yaml=None,
              steps=4, scenarios="default", output_dir=None, threads=1, keep_sandboxes=False,
              work_root=None, batch_size="day", since=None, until=None, float_tolerance=None, state=None,
              baseline=None, late_fraction=None, late_by=None, fix=False,
              max_sandbox_size=None) -> "GamedayOptions":
        project_dir = Path(project_dir).resolve()
        if isinstance(scenarios, str):
            groups = {"default": DEFAULT_SCENARIOS, "all": ALL_SCENARIOS}
            names = DEFAULT_SCENARIOS if not scenarios.strip() else tuple(dict.fromkeys(
                n for s in scenarios.split(",") if s.strip() for n in groups.get(s.strip(), (s.strip(),))))
        else:
            names = tuple(scenarios)
        unknown = [s for s in names if s not in ALL_SCENARIOS]
        if unknown:
            raise ConfigError(f"unknown scenario '{unknown[0]}' (known: {', '.join(ALL_SCENARIOS)})")
        if steps < 1:
            raise ConfigError("--steps must be at least 1")
        since_t, until_t = _timestamp_option(since, "--since"), _timestamp_option(until, "--until")
        if since_t and until_t and until_t <= since_t:
            raise ConfigError(f"--until ({until_t}) must be after --since ({since_t})")
        if float_tolerance is not None and not float(float_tolerance) >= 0:
            raise ConfigError("--float-tolerance must be a number >= 0 (a relative tolerance such as 1e-9)")
        if late_fraction is None:
            late_fraction = 0.05 if late_by not in (None, "") else 0.0
        if not 0 <= float(late_fraction) <= 1:
            raise ConfigError(f"--late-fraction must be between 0 and 1 (a share of the rows); got {late_fraction}")
        late = None
        if late_by not in (None, ""):
            try:
                late = late_by if isinstance(late_by, Batch) else Batch.parse(late_by)
            except ConfigError:
                raise ConfigError(f"--late-by '{late_by}' is not a duration: use e.g. 6h, 2d, 1w, 1mo") from None
        names = with_baseline(names)
        if not replayed(names):
            raise ConfigError("--scenarios selects nothing but the reference build, which cannot show a rerun "
                              "defect: choose one or more of " + ", ".join(replayed(ALL_SCENARIOS)))
        from ..vars import parse_vars

        parse_vars(vars_yaml)  # refused here, before anything starts
        from ..warehouse.postgres.budget import parse_size

        kwargs_size = parse_size(max_sandbox_size)
        out = Path(output_dir).resolve() if output_dir else project_dir / "target" / "rerun_safety"
        kwargs: dict[str, Any] = {}
        if work_root:
            kwargs["work_root"] = Path(work_root)
        batch = batch_size if isinstance(batch_size, Batch) else Batch.parse(batch_size)
        return cls(project_dir, profiles_dir, target, tuple(select), tuple(exclude), vars_yaml, steps, names,
                   out, threads, keep_sandboxes, batch_size=batch, since=since_t, until=until_t,
                   float_tolerance=None if float_tolerance is None else float(float_tolerance),
                   state=str(state) if state else None, baseline=load_baseline(baseline),
                   late_fraction=float(late_fraction), late_by=late, fix=bool(fix), fingerprints=bool(fix),
                   max_sandbox_size=kwargs_size, **kwargs)


def load_baseline(path: Any) -> dict[str, str] | None:
    """Verdicts of an earlier report.json, by model name."""
    if not path:
        return None
    import json

    try:
        doc = json.loads(Path(path).read_text())
        out = {str(m["name"]): str(m["verdict"]) for m in doc["models"]}
    except OSError as err:
        raise ConfigError(f"--baseline {path}: cannot read it ({err.strerror or err})") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"--baseline {path}: not a game-day report.json (expected {{\"models\": [{{\"name\", "
                          "\"verdict\"}}, ...]}})") from None
    return out
