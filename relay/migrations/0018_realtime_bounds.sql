-- Session refreshes are rate-limited per person, and the sweep removes used-up sessions.
--
-- Every refresh (`yui-auth` grant `refresh`) revokes the session it used and opens a new one,
-- so an unbounded loop of them grew one person's sessions without end. The gateway now takes
-- one token from the person's `refresh` bucket per refresh (12 an hour after a burst of 10,
-- far above an app's one an hour), and `yui_retention` removes a session a day after it ended,
-- whether it expired or was revoked (used up, or signed out). Every other rule is as in 0010.

insert into public.yui_limits (name, value, note) values
  ('refresh_burst', 10, 'app session refreshes one account can make at once'),
  ('refresh_per_min', 0.2, 'app session refreshes per account, sustained (12 an hour)')
on conflict (name) do nothing;

create or replace function public.yui_retention(dry boolean default true)
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
      (5, 'sessions', 'public.yui_sessions',
       format('expires_at < %L or revoked_at < %L', day_ago, day_ago)),
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
