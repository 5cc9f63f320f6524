-- Insert cost (issue 21): what PostgreSQL spends on the rows of a turn, and how long a person's
-- rate bucket stays locked.
--
-- Measured with pg_stat_statements (track = all) and track_functions = all on a bench relay,
-- a host of 100 agents: the person's insert ran 1.9 ms in PostgreSQL, the agent's reply 4.0 ms.
-- Much of it was planning, not work: a SQL function that PostgreSQL can't inline (it has a SET
-- clause, or is security definer) is planned anew on every call, and the helpers below were
-- called 2–7 times a turn (yui_limit 0.14 ms a call, yui_limited_caller 0.2 ms, yui_uuid_or_null
-- 0.15 ms, yui_message_exists 0.3 ms). Each agent's reply also ran the mention mirror's whole
-- query (0.5 ms of planning alone) to find no mention in a turn that had none.
--
-- 1. yui_uuid_or_null and yui_limited_caller lose their `set search_path` and are inlined
--    where they are called (their bodies name pg_catalog's operators and types themselves, as
--    0037's claim helpers do); yui_limit and yui_message_exists, security definer, become
--    plpgsql, whose plans are kept for the session.
-- 2. The person's rate bucket is taken last, in an AFTER trigger, not first: the bucket's row
--    stays locked from the take to the end of the transaction, and a person writing to several
--    agents at once queued on it for the whole insert (the other triggers, the row, its
--    indexes). The suspended check stays before the row. A row the statement doesn't insert
--    (a resend answered 409, a conflict skipped) reaches no AFTER trigger and takes no token,
--    as before; a refused row still refuses the statement with rate_limited (PT429).
-- 3. The mention mirror looks for a mentioned row among the turn's rows (by primary key, one id
--    at a time) before it builds anything.
-- 4. The person's insert checks its row's agent with one index probe, instead of fetching every
--    agent of the person (0037's array, fine for reads of many rows, is O(agents) for one).

create or replace function public.yui_uuid_or_null(value text) returns uuid
language sql immutable as $$
  select case
    when value operator(pg_catalog.~*)
         '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
    then value::pg_catalog.uuid
  end
$$;

create or replace function public.yui_limited_caller() returns boolean
language sql stable as $$
  select coalesce(public.yui_caller() operator(pg_catalog.=)
                  any ('{yui_user,yui_connector,service_role}'::pg_catalog.text[]), false)
$$;

create or replace function public.yui_limit(limit_name text) returns numeric
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select l.value from public.yui_limits l where l.name = limit_name);
end
$$;

create or replace function public.yui_message_exists(row_id uuid) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return exists (select 1 from public.yui_messages m where m.id = row_id);
end
$$;

-- 0005's guard, without the take: a resend of an existing id is let through untouched (the
-- primary key then answers 409, free); a suspended account is refused.
create or replace function public.yui_messages_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
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
  return new;
end
$$;

-- One token from the sender's bucket for each row inserted, once the row is in.
create function public.yui_messages_spend() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  host uuid;
begin
  if not public.yui_limited_caller() then
    return null;
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
  return null;
end
$$;
-- AFTER triggers fire in name order: this one sorts after yui_group_route, yui_mention_* and
-- yui_messages_notify/react.
create trigger yui_messages_spend after insert on public.yui_messages
  for each row execute function public.yui_messages_spend();

-- 0012's mirror, which returns at once when no row of the turn is a mentioned copy.
create or replace function public.yui_mention_mirror() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  me public.yui_agents;
  row_id uuid;
  mentioned boolean := false;
begin
  if pg_trigger_depth() > 1 or jsonb_typeof(new.meta -> 'turn') is distinct from 'array' then
    return null;
  end if;
  -- one probe of the primary key per id: `id = any (…)` over an array whose length the plan
  -- can't know may be planned as a scan of the table while it is small
  for row_id in select public.yui_uuid_or_null(t)
                from jsonb_array_elements_text(new.meta -> 'turn') t loop
    mentioned := exists (select 1 from public.yui_messages m
                         where m.id = row_id and m.meta ? 'mentioned');
    exit when mentioned;
  end loop;
  if not mentioned then
    return null;
  end if;
  select * into me from public.yui_agents where id = new.agent_id;
  insert into public.yui_messages (user_id, agent_id, sender, kind, body, meta)
  select new.user_id, copy.source_agent, 'agent', 'text', new.body,
         jsonb_build_object('mention_reply', jsonb_build_object(
           'agent', me.id, 'name', me.name, 'handle', me.handle,
           'msg', new.id, 'to', copy.source_msg))
  from (
    select distinct on (m.meta -> 'mentioned' ->> 'from')
      (m.meta -> 'mentioned' ->> 'from')::uuid as source_agent,
      m.meta -> 'mentioned' -> 'msg' as source_msg
    from public.yui_turn_open(new) m
    where m.meta ? 'mentioned'
    order by m.meta -> 'mentioned' ->> 'from', m.created_at desc
  ) copy
  where exists (select 1 from public.yui_agents a
                where a.id = copy.source_agent and a.user_id = new.user_id);
  return null;
end
$$;

-- 0037's policy, its agent checked by id (yui_agents' own policy applies, as the caller).
drop policy yui_messages_user_write on public.yui_messages;
create policy yui_messages_user_write on public.yui_messages for insert to yui_user
  with check (user_id = (select public.yui_uid()) and sender = 'user' and agent_id is not null
              and kind in ('text', 'event', 'control')
              and exists (select 1 from public.yui_agents a
                          where a.id = yui_messages.agent_id
                            and a.user_id = (select public.yui_uid())));

drop policy yui_messages_control_owner on public.yui_messages;
create policy yui_messages_control_owner on public.yui_messages as restrictive
  for insert to yui_user
  with check (kind <> 'control' or exists (select 1 from public.yui_agents a
                                           where a.id = yui_messages.agent_id
                                             and a.user_id = (select public.yui_uid())));
