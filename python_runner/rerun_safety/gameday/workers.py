"""Scenario worker processes (dbt is not thread-safe: parallel scenarios need processes)."""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

_WORKER: dict[str, Any] = {}


def start_pool(gameday, workers: int) -> ProcessPoolExecutor:
    """Worker processes for the scenarios. Each gets the parsed manifest instead of parsing the
    project again, and is spawned at once (their start overlaps the snapshot and the reference).
    The manifest goes through a file of the run's (private) folder, not the pipe a spawned process
    reads its arguments from: that pipe holds 64 KB, and a new process reads on only once it has
    imported the modules named before them (dbt's: seconds), so this process would wait for each."""
    from ..dbt_invoke import dump_manifest

    assert gameday.project and gameday.engine
    manifest = gameday.engine.run_dir / "worker_manifest.pickle"
    manifest.write_bytes(dump_manifest(gameday.project.manifest))
    ctx = multiprocessing.get_context("spawn")
    # the workers' progress (each run they finish) comes back on a queue, so a long scenario shows
    # its steps as it goes instead of all at its end
    queue = ctx.SimpleQueue()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(gameday.options, gameday.run_id, os.getpid(), str(manifest), queue))
    pool.rs_progress = queue  # type: ignore[attr-defined]
    for _ in range(workers):
        pool.submit(_worker_ready)  # a spawn pool starts a process per pending task
    return pool


class _QueueProgress:
    """A worker's progress: every scenario start and finished run, sent to the parent."""

    def __init__(self, queue):
        self.queue = queue

    def start(self, total: int, description: str) -> None:
        return None

    def scenario(self, name: str) -> None:
        self.queue.put(("scenario", name))

    def advance(self, description: str) -> None:
        self.queue.put(("advance", description))


def _relay(queue, progress) -> None:
    while queue is not None and not queue.empty():
        kind, text = queue.get()
        getattr(progress, kind)(text)


def run_parallel(pool, jobs: list, progress) -> dict:
    """Run each ScenarioJob (a scenario, or a scenario in isolation) in the pool, longest first; the
    workers' progress is shown as it comes."""
    done: dict = {}  # job key -> replay.JobResult
    queue = getattr(pool, "rs_progress", None)
    pending = {pool.submit(_scenario_worker, job) for job in jobs}
    while pending:
        finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
        _relay(queue, progress)
        for fut in finished:
            key, result = fut.result()
            done[key] = result
    _relay(queue, progress)
    return done


def kill_pool(pool) -> None:
    """Stop the workers now: leaving normally would wait for every running scenario."""
    for proc in list((pool._processes or {}).values()):
        proc.kill()
        proc.join(5)
    # wait for the pool's own thread to see the workers gone and close its queues, so their
    # semaphores are released here rather than reported as leaked at exit
    pool.shutdown(wait=True, cancel_futures=True)


def _worker_ready() -> None:
    return None


def _worker_init(options, run_id: str, parent_pid: int | None = None, manifest: str | None = None,
                 queue=None) -> None:
    """Runs once per worker process: load the parent's manifest (the file it wrote; or parse), attach
    to its run: the worker's own Replay."""
    from ..dbt_invoke import StatementWatch, load_manifest
    from ..project import Project
    from ..warehouse.base import PREFIX
    from ..confine import statement_guard_on
    from ..warehouse.engines import engine_for

    if parent_pid is not None:
        _die_with_parent(parent_pid)
    from .replay import NoProgress, Replay

    work = options.work_root / f"{PREFIX}{run_id}" / f"worker_{os.getpid()}"
    project = Project(options.project_dir, options.profiles_dir, options.target, options.vars_yaml, work,
                      manifest=load_manifest(Path(manifest).read_bytes()) if manifest is not None else None)
    engine = engine_for(project.target_output, options.work_root, run_id, attach=True,
                        confined=options.confinement is not None and options.confinement.confined,
                        statement_guard=statement_guard_on())
    engine.learn_project(project.manifest)
    _WORKER["replay"] = Replay(engine, project, options, _QueueProgress(queue) if queue is not None else NoProgress(),
                               StatementWatch(), SecondRun)


def _die_with_parent(parent_pid: int) -> None:
    """A worker outliving a SIGKILLed parent would keep creating sandboxes after the next run's
    sweep: ask Linux to kill it with its parent (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's cleanup still kills workers
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def _scenario_worker(job) -> tuple:
    """One scenario (a ScenarioJob) in a worker process: clone the template, replay, judge."""
    replay = _WORKER["replay"]
    plan = job.plan.attached(replay.project)  # the parent's plan, on this process's parse of the project
    replay.watch.limit_s = job.statement_limit
    result = replay.run_scenario(job.scenario, plan, job.template, job.ref_errors,
                                 isolate=job.isolate, start=job.start, branches=job.branches)
    return job.key, result.without_raw()


class SecondRun:
    """The process of its own the second of an Overlap's two runs goes to (replay.Replay.overlap): spawned,
    the run's manifest loaded from the file the scenario workers load."""

    def __init__(self, replay):
        ctx = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_worker_init, initargs=(
            replay.options, replay.engine.run_id, os.getpid(), str(replay.manifest_file())))

    def start(self, *args):
        """The second run (second_run's arguments), started: its future."""
        return self.pool.submit(second_run, *args)

    def kill(self) -> None:
        kill_pool(self.pool)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def second_run(plan, sandbox, profiles_dir: str, step, final: bool, model_ids, hold):
    """The second of an Overlap's two runs (replay.Replay.overlap), in a process of its own: the same
    dbt run as the first, its statements waiting where `hold` says; dbt's results without the raw ones."""
    from dataclasses import replace

    replay = _WORKER["replay"]
    plan = plan.attached(replay.project)
    replay.clocks[sandbox.name] = step.clock  # the first run's process set it: read, not written again
    models = [replay.project.models[u] for u in model_ids] if model_ids is not None else None
    res = replay.dbt(plan, sandbox, profiles_dir, step, final=final, models=models, hold=hold, one_thread=True)
    return replace(res, raw=None)
