-- Limits as data, token buckets, the guards that enforce them, and the kill switch.
--
-- A refused write answers 429 (SQLSTATE PT429) or 403 (PT403) and costs nothing. A direct SQL
-- session (no claims: an operator, a migration) is exempt from rates and caps.

create table public.yui_limits (
  name text primary key,
  value numeric not null check (value >= 0),
  note text not null
);
alter table public.yui_limits enable row level security;
revoke all on public.yui_limits from public, anon, yui_user, yui_connector;
grant select on public.yui_limits to yui_user, yui_connector;
create policy yui_limits_read on public.yui_limits for select to yui_user, yui_connector
  using (true);

insert into public.yui_limits (name, value, note) values
  ('msg_user_burst', 120, 'messages and taps one account can send at once'),
  ('msg_user_per_min', 30, 'messages and taps per account, sustained'),
  ('msg_connector_burst', 240, 'agent replies one host can write at once'),
  ('msg_connector_per_min', 60, 'agent replies per host, sustained'),
  ('connect_burst', 30, 'yui-connect calls per host at once'),
  ('connect_per_min', 6, 'yui-connect calls per host, sustained'),
  ('agents_api_burst', 60, 'yui-agents calls per account at once'),
  ('agents_api_per_min', 30, 'yui-agents calls per account, sustained'),
  ('pair_code_burst', 20, 'pairing codes per account at once'),
  ('pair_code_per_min', 0.34, 'pairing codes per account, sustained (about 20 an hour)'),
  ('pair_attempts_per_10min', 10, 'wrong pairing codes one address may try in 10 minutes'),
  ('agents_per_user', 50, 'agents per account'),
  ('connectors_per_user', 10, 'live hosts per account'),
  ('message_retention_days', 90, 'the daily sweep deletes older messages')
on conflict (name) do nothing;

create table public.yui_rate_buckets (
  key text primary key,
  tokens double precision not null,
  at timestamptz not null default now()
);
alter table public.yui_rate_buckets enable row level security;
revoke all on public.yui_rate_buckets from public, anon, yui_user, yui_connector;

create function public.yui_limit(limit_name text) returns numeric
language sql stable security definer set search_path = '' as $$
  select value from public.yui_limits where name = limit_name
$$;
revoke all on function public.yui_limit(text) from public;
grant execute on function public.yui_limit(text) to service_role;

-- Take one token from bucket `k`, sized by the limits `<lim>_burst` and `<lim>_per_min`.
-- A quiet client has a full bucket, so its backlog goes through at once; only a sustained
-- flood is refused, and a refusal takes nothing.
create function public.yui_take(k text, lim text) returns boolean
language plpgsql volatile security definer set search_path = '' as $$
declare
  burst double precision := coalesce(public.yui_limit(lim || '_burst'), 0);
  rate double precision := coalesce(public.yui_limit(lim || '_per_min'), 0);
  t double precision;
  last timestamptz;
begin
  select tokens, at into t, last from public.yui_rate_buckets where key = k for update;
  if not found then
    if burst < 1 then
      return false;
    end if;
    insert into public.yui_rate_buckets (key, tokens, at) values (k, burst - 1, now())
      on conflict (key) do nothing;
    if found then
      return true;
    end if;
    select tokens, at into t, last from public.yui_rate_buckets where key = k for update;
  end if;
  t := least(burst, t + greatest(extract(epoch from now() - last), 0) * rate / 60);
  if t < 1 then
    update public.yui_rate_buckets set tokens = t, at = now() where key = k;
    return false;
  end if;
  update public.yui_rate_buckets set tokens = t - 1, at = now() where key = k;
  return true;
end
$$;
revoke all on function public.yui_take(text, text) from public;
grant execute on function public.yui_take(text, text) to service_role;

-- Requests that come through the gateway carry a Yui role; only those are limited.
create function public.yui_limited_caller() returns boolean
language sql stable set search_path = '' as $$
  select coalesce(public.yui_caller() in ('yui_user', 'yui_connector', 'service_role'), false)
$$;
grant execute on function public.yui_limited_caller() to yui_user, yui_connector, service_role;

-- Messages: a resend of an existing id is let through untouched (the primary key then answers
-- 409, free); a suspended account is refused; otherwise one token from the sender's bucket.
create function public.yui_messages_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  host uuid;
begin
  if not public.yui_limited_caller() then
    return new;
  end if;
  if exists (select 1 from public.yui_messages m where m.id = new.id) then
    return new;
  end if;
  if exists (select 1 from public.yui_users u where u.id = new.user_id
             and u.suspended_at is not null) then
    raise exception 'account_suspended' using errcode = 'PT403';
  end if;
  if new.sender = 'user' then
    if not public.yui_take('msg:u:' || new.user_id, 'msg_user') then
      raise exception 'rate_limited' using errcode = 'PT429';
    end if;
  else
    host := coalesce(public.yui_cid(),
                     (select a.connector_id from public.yui_agents a where a.id = new.agent_id));
    if not public.yui_take('msg:c:' || coalesce(host::text, 'none'), 'msg_connector') then
      raise exception 'rate_limited' using errcode = 'PT429';
    end if;
  end if;
  return new;
end
$$;
create trigger yui_messages_guard before insert on public.yui_messages
  for each row execute function public.yui_messages_guard();

-- Caps on what an account may create, and the pairing-code bucket.
create function public.yui_caps_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  n bigint;
  cap numeric;
begin
  if not public.yui_limited_caller() then
    return new;
  end if;
  if exists (select 1 from public.yui_users u where u.id = new.user_id
             and u.suspended_at is not null) then
    raise exception 'account_suspended' using errcode = 'PT403';
  end if;
  if tg_table_name = 'yui_agents' then
    select count(*) into n from public.yui_agents where user_id = new.user_id;
    cap := public.yui_limit('agents_per_user');
  elsif tg_table_name = 'yui_connectors' then
    select count(*) into n from public.yui_connectors
      where user_id = new.user_id and revoked_at is null;
    cap := public.yui_limit('connectors_per_user');
  elsif tg_table_name = 'yui_pairings' then
    if not public.yui_take('pair:u:' || new.user_id, 'pair_code') then
      raise exception 'rate_limited' using errcode = 'PT429';
    end if;
    return new;
  end if;
  if cap is not null and n >= cap then
    raise exception 'limit_reached' using errcode = 'PT403', detail = tg_table_name;
  end if;
  return new;
end
$$;
create trigger yui_caps_guard before insert on public.yui_agents
  for each row execute function public.yui_caps_guard();
create trigger yui_caps_guard before insert on public.yui_connectors
  for each row execute function public.yui_caps_guard();
create trigger yui_caps_guard before insert on public.yui_pairings
  for each row execute function public.yui_caps_guard();

-- The kill switch: suspend or restore a person or a host. Reversible; deletes nothing.
create function public.yui_suspend(kind text, target uuid, on_ boolean, reason text default null)
returns timestamptz
language plpgsql volatile security definer set search_path = '' as $$
declare
  stamp timestamptz := case when on_ then now() end;
begin
  if kind = 'user' then
    update public.yui_users set suspended_at = stamp,
      suspended_reason = case when on_ then reason end where id = target;
  elsif kind = 'connector' then
    update public.yui_connectors set suspended_at = stamp,
      suspended_reason = case when on_ then reason end where id = target;
  else
    raise exception 'kind must be user or connector' using errcode = '22023';
  end if;
  if not found then
    raise exception 'no % %', kind, target using errcode = 'PT404';
  end if;
  return stamp;
end
$$;
revoke all on function public.yui_suspend(text, uuid, boolean, text) from public;
grant execute on function public.yui_suspend(text, uuid, boolean, text) to service_role;
