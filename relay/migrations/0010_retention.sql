-- Retention: what the daily sweep (`yui sweep`) removes from the tables, as one rule in SQL.
--
-- `yui_retention(dry)` counts (dry, the default) or deletes, kind by kind and in this order:
-- messages older than the `message_retention_days` limit; control rows (a Stop and its answer)
-- after 7 days; pairing codes, failed pairing attempts and app sessions a day after they ended;
-- rate buckets idle for a day (a missing bucket is a full one). Each count excludes what an
-- earlier kind already takes, so a dry run's numbers are what a real one deletes. Media is swept
-- through Storage instead (`yui_media_orphans`): a picture that only deleted messages pointed at
-- becomes an orphan once they are gone.

create function public.yui_retention(dry boolean default true)
returns table (what text, n_rows bigint)
language plpgsql volatile security definer set search_path = '' as $$
declare
  cutoff timestamptz :=
    now() - coalesce(public.yui_limit('message_retention_days'), 90) * interval '1 day';
  day_ago timestamptz := now() - interval '1 day';
  rule record;
begin
  for rule in
    select * from (values
      (1, 'messages', 'public.yui_messages', format('created_at < %L', cutoff)),
      (2, 'control_rows', 'public.yui_messages',
       format('kind = %L and created_at < %L and created_at >= %L',
              'control', now() - interval '7 days', cutoff)),
      (3, 'pairings', 'public.yui_pairings', format('expires_at < %L', day_ago)),
      (4, 'pair_attempts', 'public.yui_pair_attempts', format('created_at < %L', day_ago)),
      (5, 'sessions', 'public.yui_sessions', format('expires_at < %L', day_ago)),
      (6, 'rate_buckets', 'public.yui_rate_buckets', format('at < %L', day_ago))
    ) as r (ord, kind, tbl, cond)
    order by ord
  loop
    if dry then
      execute format('select count(*) from %s where %s', rule.tbl, rule.cond) into n_rows;
    else
      execute format('with gone as (delete from %s where %s returning 1) select count(*) from gone',
                     rule.tbl, rule.cond) into n_rows;
    end if;
    what := rule.kind;
    return next;
  end loop;
end
$$;
revoke all on function public.yui_retention(boolean) from public;
grant execute on function public.yui_retention(boolean) to service_role;
