{#- Events relative to the clock (a view, so "now" is the test's own now): 20 + d % 3 events on
    each of the 20 days before today, and 3 events so far today, at midnight. A morning check sees
    today's few rows; volume_within_band leaves the current day out by default. -#}
select
  days.d * 1000 + seq.i as event_id,
  cast(date_trunc('day', cast(current_timestamp as timestamp)) as timestamp) - days.d * interval '1 day' as event_at
{%- if target.type == 'spark' %}
from range(0, 21) as days(d)
join range(1, 31) as seq(i)
{%- else %}
from generate_series(0, 20) as days(d)
join generate_series(1, 30) as seq(i)
{%- endif %}
  on seq.i <= case when days.d = 0 then 3 else 20 + days.d % 3 end
