"""Pure logic: what a scenario builds beyond its stateful models (rebuild.py), on a small graph.

    raw.events -> inc (incremental) -> v_inc (view) -> t_inc (table)
    raw.events -> inc2 (incremental) -> t2 (table, reads dim too)
    raw.users  -> dim (table)
    raw.events -> ranked (table, row_number over ties: order-sensitive)
"""
from types import SimpleNamespace

import pytest

from rerun_safety.project import Model
from rerun_safety.gameday.rebuild import (CARRIED, determinism_ids, final_rebuild, first_ids, order_sensitive,
                                  order_sensitive_sql)


def model(name: str, materialized: str, parents=(), hooks: str = "", language: str = "sql") -> Model:
    return Model(unique_id=f"model.p.{name}", name=name, fqn=("p", name), resource_type="model",
                 materialized=materialized, strategy="merge" if materialized == "incremental" else None,
                 key=(), partition_key=None, event_time=None, database=None, schema="main", identifier=name,
                 parents=tuple(f"model.p.{p}" for p in parents), sources=(), ignore_columns=(),
                 window_driven=False, language=language, raw_code=hooks or "select 1")


def plan_of(models: list[Model], hooked: dict[str, str] | None = None, sensitive: set[str] = frozenset()):
    by_id = {m.unique_id: m for m in models}

    def ancestors(uids):
        seen, stack = set(), list(uids)
        while stack:
            for p in by_id[stack.pop()].parents:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    nodes = {f"model.p.{n}": SimpleNamespace(config=SimpleNamespace(pre_hook=[], post_hook=[sql]))
             for n, sql in (hooked or {}).items()}
    project = SimpleNamespace(models=by_id, ancestors=ancestors, manifest=SimpleNamespace(nodes=nodes))
    return SimpleNamespace(project=project, build=models, judged=[m for m in models if m.judged],
                           stateful=[m for m in models if m.keeps_state],
                           facts=SimpleNamespace(order_sensitive={f"model.p.{n}" for n in sensitive}))


GRAPH = [model("inc", "incremental"), model("v_inc", "view", ["inc"]), model("t_inc", "table", ["v_inc"]),
         model("inc2", "incremental"), model("dim", "table"), model("t2", "table", ["inc2", "dim"]),
         model("ranked", "table")]
U = "model.p."


def names(uids) -> list[str]:
    return [u.removeprefix(U) for u in uids]


def test_nothing_differs_nothing_is_built():
    plan = plan_of(GRAPH)
    current = {m.unique_id for m in plan.stateful}
    assert final_rebuild(plan, set(), {}, current, current) == ([], {})
    assert names(sorted(first_ids(plan))) == ["inc", "inc2"]


def test_below_a_differing_model_everything_is_built_with_what_it_reads():
    plan = plan_of(GRAPH)
    current = {m.unique_id for m in plan.stateful}
    rebuild, blocked = final_rebuild(plan, {U + "inc"}, {}, current, current)
    assert (names(rebuild), blocked) == (["v_inc", "t_inc"], {})
    # t2 reads dim, which no scenario built: it is built with it, in order
    rebuild, _ = final_rebuild(plan, {U + "inc2"}, {}, current, current)
    assert names(rebuild) == ["dim", "t2"]


def test_below_a_failed_model_nothing_is_built_and_the_reason_names_it():
    plan = plan_of(GRAPH)
    current = {m.unique_id for m in plan.stateful}
    rebuild, blocked = final_rebuild(plan, {U + "inc"}, {U + "inc2": "batch 2: division by zero"}, current, current)
    assert names(rebuild) == ["v_inc", "t_inc"]
    assert blocked == {U + "t2": "not built at the end: an upstream model failed (inc2)"}
    rebuild, blocked = final_rebuild(plan, set(), {U + "inc2": "not built at batch 2: an upstream model failed"},
                                     current, current, "batch 4")
    assert blocked == {U + "t2": "not built at batch 4: an upstream model was not built (inc2)"}


def test_hooks_and_order_sensitive_models_are_always_built_and_so_is_what_reads_them():
    plan = plan_of(GRAPH, hooked={"dim": "insert into audit.log select 1"}, sensitive={"ranked"})
    current = {m.unique_id for m in plan.stateful}
    rebuild, _ = final_rebuild(plan, set(), {}, current, current)
    assert names(rebuild) == ["dim", "t2", "ranked"]  # t2 reads dim, whose hook ran
    assert names(sorted(first_ids(plan))) == ["dim", "inc", "inc2"]  # a hooked model runs at the first build too


def test_determinism_builds_what_may_depend_on_row_order_and_what_it_reads():
    graph = [*GRAPH, model("top", "table", ["t_inc"])]
    plan = plan_of(graph, sensitive={"top"})
    assert names(sorted(determinism_ids(plan, plan.facts.order_sensitive))) == ["inc", "t_inc", "top", "v_inc"]
    current = determinism_ids(plan, plan.facts.order_sensitive)
    # nothing differs: nothing more; `top` differs: nothing reads it
    assert final_rebuild(plan, set(), {}, current, current & plan.facts.order_sensitive)[0] == []
    assert final_rebuild(plan, {U + "top"}, {}, current, current & plan.facts.order_sensitive)[0] == []


def test_a_model_not_compared_counts_as_differing_when_it_may_differ_on_its_own():
    graph = [model("empty_inc", "incremental"), model("below", "table", ["empty_inc"])]
    plan = plan_of(graph)
    plan.judged = [graph[1]]  # empty_inc built but not compared
    current = {U + "empty_inc"}
    assert names(final_rebuild(plan, set(), {}, current, current)[0]) == ["below"]
    assert final_rebuild(plan, set(), {}, current, set())[0] == []


@pytest.mark.parametrize("sql, found", [
    ("select user_id, count(*) n, sum(amount) a from t group by 1", None),
    ("select cast(a as date), coalesce(b, 0), md5(c) from t join u using (k) union all select 1, 2, 3", None),
    ("select distinct a, b from t where a in (select a from u)", None),
    ("select *, row_number() over (partition by a order by b) as rn from t", "ROW_NUMBER() OVER"),
    ("select sum(x) over (partition by a) from t", "SUM(x) OVER"),
    ("select * from t limit 3", "LIMIT 3"),
    ("select distinct on (a) a, b from t", "DISTINCT ON"),
    ("select a, any_value(b) from t group by a", "ANY_VALUE"),
    ("select a, string_agg(b, ',') from t group by a", "LISTAGG"),
    ("select a, list(b) from t group by a", "ARRAY_AGG"),
    ("select a from t where d >= current_date - 7", "CURRENT_DATE"),
    ("select random() from t", "RAND"),
    ("select my_udf(a) from t", "MY_UDF"),
    ("select from where", "SQL the parser does not read"),
])
def test_order_sensitive_sql(sql, found):
    got = order_sensitive_sql(sql, "duckdb")
    assert (got is None) if found is None else (got is not None and got.upper().startswith(found.upper()))


def test_order_sensitive_models():
    graph = [*GRAPH, model("py", "table", language="python"), model("eph", "ephemeral")]
    plan = plan_of(graph, hooked={"dim": "select 1"})
    compiled = {m.unique_id: "select a, count(*) from t group by a" for m in graph}
    compiled[U + "ranked"] = "select *, row_number() over (order by a) from t"
    del compiled[U + "t2"]  # not compiled (it failed in the reference): sensitive
    assert names(sorted(order_sensitive(plan, compiled, "duckdb"))) == ["dim", "py", "ranked", "t2"]


def test_the_carried_message_says_why():
    assert CARRIED.startswith("not built again: everything it reads matched the reference")


def test_tables_no_run_can_change_are_built_once():
    """frozen_ids: a table over static inputs only (directly, or through tables and views of the same
    kind) is built in a scenario's first build and not run again; anything on a timed input, below a
    stateful model, reading the clock or row order, with hooks or reading a relation by name is run
    at every batch as before."""
    from rerun_safety.gameday.rebuild import frozen_ids

    def t(name, materialized="table", parents=(), raw="select 1", sources=()):
        m = model(name, materialized, parents)
        return m.__class__(**{**m.__dict__, "raw_code": raw, "sources": tuple(sources)})

    events, users = "source.p.raw.events", "source.p.raw.users"
    graph = [t("dim", sources=[users]), t("dim_v", "view", sources=[users]), t("on_view", parents=["dim_v"]),
             t("stg", sources=[events]), t("inc", "incremental", ["dim", "stg"]), t("below_inc", parents=["inc"]),
             t("clocky", sources=[users]), t("below_clocky", parents=["clocky"]), t("hooked", sources=[users]),
             t("named", raw="select * from raw.users"), t("chained", parents=["dim", "on_view"])]
    by_id = {m.unique_id: m for m in graph}

    def ancestors(uids):
        seen, stack = set(), list(uids)
        while stack:
            for p in by_id[stack.pop()].parents:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    def timed_inputs_of(uids):
        return {s for u in set(uids) | ancestors(uids) for s in by_id[u].sources}

    nodes = {m.unique_id: SimpleNamespace(config=SimpleNamespace(pre_hook=[], post_hook=["insert into log select 1"]
                                                                  if m.name == "hooked" else []),
                                          depends_on=SimpleNamespace(macros=())) for m in graph}
    project = SimpleNamespace(models=by_id, ancestors=ancestors, timed_inputs_of=timed_inputs_of, adapter="duckdb",
                              manifest=SimpleNamespace(nodes=nodes, macros={}))
    plan = SimpleNamespace(project=project, build=graph, inputs=[SimpleNamespace(unique_id=events)],
                           facts=SimpleNamespace(order_sensitive={U + "clocky"}))
    assert sorted(names(frozen_ids(plan))) == ["chained", "dim", "on_view"]
    # once the users arrive batch by batch too, nothing is frozen
    plan.inputs.append(SimpleNamespace(unique_id=users))
    assert frozen_ids(plan) == set()
