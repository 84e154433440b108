{#- Window vars: strict ISO-8601 parsing in Jinja, so a value never reaches SQL unless it is a
    well-formed timestamp. Internal (`_rs_` prefix): no contract. -#}


{#- Parse one ISO-8601 value (date, or date and time; 'Z' / '+00:00' allowed, other offsets
    refused) into a datetime. Raises a compiler error naming the var and the expected format. -#}
{% macro _rs_parse_iso(var_name, value) %}
  {%- set text = (value | string) | trim -%}
  {%- set pattern = '^(\\d{4})-(\\d{2})-(\\d{2})(?:[T ](\\d{2}):(\\d{2})(?::(\\d{2})(?:\\.(\\d{1,6}))?)?)?(Z|[+-]00:?00)?$' -%}
  {%- set m = modules.re.match(pattern, text) -%}
  {%- set fix = "Fix: pass an ISO-8601 date or timestamp in UTC, e.g. --vars '{" ~ var_name ~ ": \"2026-01-01T00:00:00\"}'" -%}
  {%- if not m -%}
    {{ exceptions.raise_compiler_error("window_filter: var '" ~ var_name ~ "' is not an ISO-8601 date/timestamp: '" ~ text ~ "'. " ~ fix) }}
  {%- endif -%}
  {%- set g = m.groups() -%}
  {%- set y = g[0] | int -%}{%- set mo = g[1] | int -%}{%- set d = g[2] | int -%}
  {%- set hh = (g[3] or '0') | int -%}{%- set mi = (g[4] or '0') | int -%}{%- set ss = (g[5] or '0') | int -%}
  {%- set us = ((g[6] or '') ~ '000000')[:6] | int -%}
  {%- set valid = y >= 1 and 1 <= mo <= 12 and d >= 1 and hh < 24 and mi < 60 and ss < 60 -%}
  {%- if valid -%}
    {%- set first = modules.datetime.date(y, mo, 1) -%}
    {%- set next_first = modules.datetime.date(y + 1, 1, 1) if mo == 12 else modules.datetime.date(y, mo + 1, 1) -%}
    {%- set valid = d <= (next_first - first).days -%}
  {%- endif -%}
  {%- if not valid -%}
    {{ exceptions.raise_compiler_error("window_filter: var '" ~ var_name ~ "' is not a valid calendar date/time: '" ~ text ~ "'. " ~ fix) }}
  {%- endif -%}
  {{ return(modules.datetime.datetime(y, mo, d, hh, mi, ss, us)) }}
{% endmacro %}


{#- The window from the vars, as {'start': datetime, 'end': datetime}, or none when neither var
    is set. One var without the other, or start >= end, is an error. -#}
{% macro _rs_window_bounds() %}
  {%- set raw_start = var('rerun_safety_window_start', none) -%}
  {%- set raw_end = var('rerun_safety_window_end', none) -%}
  {%- if raw_start is none and raw_end is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- if raw_start is none or raw_end is none -%}
    {{ exceptions.raise_compiler_error("window_filter: set both vars rerun_safety_window_start and rerun_safety_window_end (got start=" ~ raw_start ~ ", end=" ~ raw_end ~ "). Fix: --vars '{rerun_safety_window_start: \"2026-01-01\", rerun_safety_window_end: \"2026-01-02\"}'") }}
  {%- endif -%}
  {%- set start = rerun_safety._rs_parse_iso('rerun_safety_window_start', raw_start) -%}
  {%- set end = rerun_safety._rs_parse_iso('rerun_safety_window_end', raw_end) -%}
  {%- if start >= end -%}
    {{ exceptions.raise_compiler_error("window_filter: the window is half-open [start, end) and start must be before end; got start=" ~ start ~ ", end=" ~ end ~ ". Fix: swap or widen the vars.") }}
  {%- endif -%}
  {{ return({'start': start, 'end': end}) }}
{% endmacro %}


{#- A typed timestamp literal from a datetime produced by _rs_parse_iso (never from raw input). -#}
{% macro _rs_timestamp_literal(dt) %}
  {{- return("cast('" ~ dt.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "' as timestamp)") -}}
{% endmacro %}
