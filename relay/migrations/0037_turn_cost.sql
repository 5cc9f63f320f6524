-- Turn cost (issue 21): the checks row-level security makes on every row of a turn, made cheap.
--
-- A turn made ~330 calls of the claim helpers and ~15 of yui_connector_serves (a three-table
-- join, run once per row the policy looks at): about half of PostgreSQL's time in a turn.
--
-- 1. The claim helpers lose their `set search_path`: PostgreSQL never inlines a function with a
--    SET clause, and inlined they are a few expressions instead of a call each. Their bodies
--    name pg_catalog's operators and types themselves, so no caller's search path can change
--    what they read.
-- 2. The policies on yui_messages read the caller once per statement (`(select …)` is an
--    initplan) and compare a row's agent with the agents the caller may touch, fetched once
--    per statement (`agent_id = any ((select …))`), instead of a function call per row. The
--    two helpers below are the same checks as yui_owns_agent and yui_connector_serves, as sets.
-- 3. Those helpers, and yui_connector_serves and yui_owns_agent (still used by the media
--    policies and the group notes), are plpgsql: its plans are kept for the session, where a
--    SQL function that can't be inlined is planned anew on every call.

create or replace function public.yui_claims() returns jsonb
language sql stable as $$
  select coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''),
                  '{}')::pg_catalog.jsonb
$$;

create or replace function public.yui_claim_uuid(claim text) returns uuid
language sql stable as $$
  select case
    when public.yui_claims() operator(pg_catalog.->>) claim
         operator(pg_catalog.~*) '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
    then (public.yui_claims() operator(pg_catalog.->>) claim)::pg_catalog.uuid
  end
$$;

create or replace function public.yui_uid() returns uuid
language sql stable as $$ select public.yui_claim_uuid('sub') $$;

create or replace function public.yui_cid() returns uuid
language sql stable as $$ select public.yui_claim_uuid('cid') $$;

create or replace function public.yui_caller() returns text
language sql stable as $$
  select nullif(public.yui_claims() operator(pg_catalog.->>) 'role', '')
$$;

-- The agents the calling person owns (as the caller: the agents table's own policy applies).
create function public.yui_owned_agents() returns uuid[]
language plpgsql stable set search_path = '' as $$
begin
  return array(select a.id from public.yui_agents a where a.user_id = public.yui_uid());
end
$$;
revoke all on function public.yui_owned_agents() from public;
grant execute on function public.yui_owned_agents() to yui_user;

-- The agents the calling host serves: yui_connector_serves, for every agent at once.
create function public.yui_served_agents() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return array(
    select a.id
    from public.yui_agents a
    join public.yui_connectors c on c.id = a.connector_id and c.user_id = a.user_id
    join public.yui_users u on u.id = a.user_id
    where a.user_id = public.yui_uid()
      and c.id = public.yui_cid()
      and c.revoked_at is null
      and c.suspended_at is null
      and u.suspended_at is null);
end
$$;
revoke all on function public.yui_served_agents() from public;
grant execute on function public.yui_served_agents() to yui_connector;

create or replace function public.yui_connector_serves(agent uuid) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return coalesce(agent = any (public.yui_served_agents()), false);
end
$$;

create or replace function public.yui_owns_agent(agent uuid) returns boolean
language plpgsql stable set search_path = '' as $$
begin
  return exists (select 1 from public.yui_agents a
                 where a.id = agent and a.user_id = public.yui_uid());
end
$$;

-- The same policies as 0004, 0007, 0013 and 0015, each caller check made once per statement.
drop policy yui_messages_user_read on public.yui_messages;
create policy yui_messages_user_read on public.yui_messages for select to yui_user
  using (user_id = (select public.yui_uid())
         and (agent_id is null or agent_id = any ((select public.yui_owned_agents())::uuid[])));

drop policy yui_messages_user_write on public.yui_messages;
create policy yui_messages_user_write on public.yui_messages for insert to yui_user
  with check (user_id = (select public.yui_uid()) and sender = 'user' and agent_id is not null
              and kind in ('text', 'event', 'control')
              and agent_id = any ((select public.yui_owned_agents())::uuid[]));

drop policy yui_messages_user_delete on public.yui_messages;
create policy yui_messages_user_delete on public.yui_messages for delete to yui_user
  using (user_id = (select public.yui_uid())
         and (agent_id is null or agent_id = any ((select public.yui_owned_agents())::uuid[])));

drop policy yui_messages_user_group on public.yui_messages;
create policy yui_messages_user_group on public.yui_messages as restrictive
  for insert to yui_user
  with check (yui_messages.thread_id is null or exists (
    select 1 from public.yui_thread_members tm
    where tm.thread_id = yui_messages.thread_id and tm.agent_id = yui_messages.agent_id
      and tm.user_id = (select public.yui_uid()) and tm.left_at is null));

drop policy yui_messages_control_owner on public.yui_messages;
create policy yui_messages_control_owner on public.yui_messages as restrictive
  for insert to yui_user
  with check (kind <> 'control' or agent_id = any ((select public.yui_owned_agents())::uuid[]));

drop policy yui_messages_connector_read on public.yui_messages;
create policy yui_messages_connector_read on public.yui_messages for select to yui_connector
  using (user_id = (select public.yui_uid())
         and agent_id = any ((select public.yui_served_agents())::uuid[]));

drop policy yui_messages_connector_write on public.yui_messages;
create policy yui_messages_connector_write on public.yui_messages for insert to yui_connector
  with check (sender = 'agent' and kind in ('text', 'control')
              and user_id = (select public.yui_uid())
              and agent_id = any ((select public.yui_served_agents())::uuid[]));

drop policy yui_messages_connector_ack on public.yui_messages;
create policy yui_messages_connector_ack on public.yui_messages for update to yui_connector
  using (sender = 'user' and user_id = (select public.yui_uid())
         and agent_id = any ((select public.yui_served_agents())::uuid[]))
  with check (sender = 'user' and user_id = (select public.yui_uid())
              and agent_id = any ((select public.yui_served_agents())::uuid[]));

drop policy yui_messages_control_host on public.yui_messages;
create policy yui_messages_control_host on public.yui_messages as restrictive
  for insert to yui_connector
  with check (kind <> 'control'
              or (user_id = (select public.yui_uid())
                  and agent_id = any ((select public.yui_served_agents())::uuid[])));

drop policy yui_agents_connector_read on public.yui_agents;
create policy yui_agents_connector_read on public.yui_agents for select to yui_connector
  using (user_id = (select public.yui_uid()) and id = any ((select public.yui_served_agents())::uuid[]));

-- A host's read of what waits (the person's unhandled rows, oldest first) walked the person's
-- whole thread from its floor by (user_id, created_at), rows of every kind and age, because
-- the unhandled index starts with one agent and the read names all of the host's agents at
-- once. Here is what it asks for, and nothing else.
create index yui_messages_user_unhandled_idx on public.yui_messages (user_id, created_at, id)
  where sender = 'user' and handled_at is null;

-- A reply's turn rows, looked up by their ids (`= any (array(...))`, the primary key) instead of
-- `in (select …)`, which the planner may answer with a hash join over every row of the person
-- (a reply read ~4,000 rows on a long thread). yui_turn_open is plpgsql for the plan it keeps.
create or replace function public.yui_turn_open(reply public.yui_messages)
returns setof public.yui_messages
language plpgsql stable security definer set search_path = '' as $$
begin
  return query
  select m.*
  from public.yui_messages m
  where m.id = any (array(select public.yui_uuid_or_null(t)
                          from jsonb_array_elements_text(
                                 case when jsonb_typeof(reply.meta -> 'turn') = 'array'
                                      then reply.meta -> 'turn' else '[]' end) t))
    and m.user_id = reply.user_id and m.agent_id = reply.agent_id and m.sender = 'user'
    and (m.handled_at is null
         or m.handled_at > now() - make_interval(
              secs => coalesce(public.yui_limit('turn_window_seconds'), 300)::double precision));
end
$$;

-- 0013's yui_group_accept, its reply lookup by id as above; the rest as it was.
create or replace function public.yui_group_accept() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  t public.yui_threads;
  g jsonb;
  asked uuid[];
  answered record;
  guard uuid;
begin
  if pg_trigger_depth() > 1 or public.yui_message_exists(new.id) then
    return new;
  end if;

  -- An agent's reply: belongs to the group of the newest row it answers (a turn may gather
  -- rows from several threads; the newest one says where the conversation is now).
  if new.sender = 'agent' then
    new.meta := new.meta - 'group';
    if jsonb_typeof(new.meta -> 'turn') = 'array' then
      select m.thread_id, m.meta -> 'group' as g into answered
      from public.yui_messages m
      where m.id = any (array(select public.yui_uuid_or_null(x)
                              from jsonb_array_elements_text(new.meta -> 'turn') x))
        and m.user_id = new.user_id and m.agent_id = new.agent_id and m.sender = 'user'
      order by m.created_at desc, m.id desc
      limit 1;
      if answered.thread_id is not null and answered.g ? 'root' then
        new.thread_id := answered.thread_id;
        new.meta := (new.meta - 'mentions') || jsonb_build_object('group', jsonb_strip_nulls(
          jsonb_build_object('thread', answered.thread_id, 'root', answered.g -> 'root',
                             'hop', answered.g -> 'hop', 'mentions', new.meta -> 'mentions')));
      end if;
    end if;
    return new;
  end if;

  -- The person's row outside a group: meta.group is the database's, never the app's.
  if new.thread_id is null then
    new.meta := new.meta - 'group';
    return new;
  end if;

  select * into t from public.yui_threads where id = new.thread_id and user_id = new.user_id;
  if not found then
    raise exception 'group_not_found' using errcode = '22023';
  end if;
  if t.archived_at is not null then
    raise exception 'group_archived' using errcode = '22023';
  end if;
  if new.meta ? 'mention' then
    raise exception 'group_uses_to' using errcode = '22023';
  end if;
  g := case when jsonb_typeof(new.meta -> 'group') = 'object' then new.meta -> 'group'
            else '{}' end;

  -- Let it and Stop: handled on the way in, in the lead's thread.
  if g ? 'control' then
    if g ->> 'control' = 'continue' then
      guard := public.yui_uuid_or_null(g ->> 'guard');
      -- locked, so two taps on one guard can't both let it through
      perform 1 from public.yui_messages m
        where m.id = guard and m.thread_id = t.id and m.sender = 'agent'
          and m.meta -> 'group' -> 'guard' ->> 'state' = 'held'
        for update;
      if not found then
        raise exception 'group_guard_gone' using errcode = '22023';
      end if;
      g := jsonb_build_object('thread', t.id, 'control', 'continue', 'guard', guard);
    elsif g ->> 'control' = 'stop' then
      g := jsonb_build_object('thread', t.id, 'control', 'stop');
    else
      raise exception 'group_control_unknown' using errcode = '22023';
    end if;
    new.agent_id := t.lead;
    new.meta := new.meta || jsonb_build_object('group', g);
    new.delivered_at := now();
    new.handled_at := now();
    return new;
  end if;

  -- Who it is to: the addressees the app names, else (for words) the author of the message
  -- it replies to, else the lead. A tap goes to the agent whose screen it was.
  if new.kind = 'event' then
    asked := array[new.agent_id];
  elsif jsonb_typeof(g -> 'to') = 'array' and jsonb_array_length(g -> 'to') > 0 then
    asked := array(select named.id from (
                     select public.yui_uuid_or_null(e.v) as id, min(e.n) as n
                     from jsonb_array_elements_text(g -> 'to') with ordinality as e(v, n)
                     group by 1) named
                   order by named.n);
    if cardinality(asked) > 3 then
      raise exception 'group_too_many' using errcode = '22023';
    end if;
  elsif g ? 'to' and jsonb_typeof(g -> 'to') not in ('array', 'null') then
    raise exception 'group_agent_not_member' using errcode = '22023';
  else
    select array[m.agent_id] into asked from public.yui_messages m
      where m.id = public.yui_uuid_or_null(new.meta -> 'reply_to' ->> 'msg')
        and m.thread_id = t.id and m.sender = 'agent';
    asked := coalesce(asked, array[t.lead]);
  end if;
  if exists (select 1 from unnest(asked) x
             where x is null or not exists (
               select 1 from public.yui_thread_members tm
               where tm.thread_id = t.id and tm.agent_id = x and tm.left_at is null)) then
    raise exception 'group_agent_not_member' using errcode = '22023';
  end if;

  new.agent_id := asked[1];
  if new.kind = 'event' then
    new.meta := new.meta || jsonb_build_object('group', jsonb_build_object(
      'thread', t.id, 'root', new.id, 'hop', 0, 'to', to_jsonb(asked)));
    return new;
  end if;
  new.meta := new.meta || jsonb_build_object('group', jsonb_build_object(
    'thread', t.id, 'root', new.id, 'hop', 0, 'to', to_jsonb(asked),
    'words', left(public.yui_without_reply_line(new.body), 2000)));
  new.body := public.yui_group_body(t, 0, 'person', new.id, new.created_at, new.body);
  return new;
end
$$;
