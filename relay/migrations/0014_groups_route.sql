-- Group threads (YUI-93), part 2: what a group row sets off once it has landed, and the notes
-- a host reads for its agent. Part 1 (0013_groups.sql) holds the tables, the row on its way in
-- and the trigger order; this file adds `yui_group_route` (after insert), which sorts first of
-- the after-insert triggers.
--
-- The budget. The person's message is hop 0. An agent answering hop n may @ up to three
-- members, each ask a person row in that member's thread at hop n+1, while n+1 <= max_hops and
-- the message has bought fewer than max_turns agent turns (every row asking an agent on its
-- behalf counts: the message, its copies, each handoff). An ask past either budget is not
-- sent: a guard row in the asking agent's look holds it, for the person's Let it (the held
-- ask goes, on a fresh budget rooted at the tap, once) or Stop (the chain ends). Ping-pong
-- between two agents spends the same budget; there is nothing special to game.

-- Agent turns a message of the person's has bought so far (Let it and Stop buy none).
create function public.yui_group_turns(thread uuid, root uuid) returns bigint
language sql stable security definer set search_path = '' as $$
  select count(*) from public.yui_messages m
  where m.thread_id = thread and m.meta #>> '{group,root}' = root::text
    and m.sender = 'user' and not m.meta -> 'group' ? 'control'
$$;
revoke all on function public.yui_group_turns(uuid, uuid) from public;

-- One status line in the thread of the agent it is about, a microsecond after the row it
-- follows, when that agent can't answer now.
create function public.yui_group_status(
  t public.yui_threads, root uuid, about uuid, follows timestamptz
) returns void
language plpgsql security definer set search_path = '' as $$
declare
  status text := public.yui_reach_status(about);
begin
  if status is null then
    return;
  end if;
  insert into public.yui_messages
    (user_id, agent_id, thread_id, sender, kind, body, meta, created_at)
  select t.user_id, a.id, t.id, 'agent', 'text', public.yui_status_sentence(a.name, status),
         jsonb_build_object('group', jsonb_build_object(
           'thread', t.id, 'root', root, 'about', a.id, 'status', status)),
         follows + interval '1 microsecond'
  from public.yui_agents a where a.id = about;
end
$$;
revoke all on function public.yui_group_status(public.yui_threads, uuid, uuid, timestamptz)
  from public;

-- A handoff: a person row in the target's thread, asking on the asker's behalf.
create function public.yui_group_ask(
  t public.yui_threads, target uuid, hop integer, root uuid, asker public.yui_agents,
  msg uuid, upto timestamptz, words text
) returns void
language plpgsql security definer set search_path = '' as $$
declare
  landed timestamptz;
begin
  insert into public.yui_messages (user_id, agent_id, thread_id, sender, kind, body, meta)
  values (t.user_id, target, t.id, 'user', 'text',
          public.yui_group_body(t, hop, asker.handle, msg, upto, words),
          jsonb_build_object('group', jsonb_build_object(
            'thread', t.id, 'root', root, 'hop', hop,
            'from', asker.id, 'from_name', asker.name, 'msg', msg)))
  returning created_at into landed;
  perform public.yui_group_status(t, root, target, landed);
end
$$;
revoke all on function public.yui_group_ask(
  public.yui_threads, uuid, integer, uuid, public.yui_agents, uuid, timestamptz, text)
  from public;

-- An agent's reply in a group: its @s become asks while the budget holds, guard rows when
-- it doesn't, and nothing at all when the chain was rooted before the last Stop, the group is
-- archived, or the agent has left it.
create function public.yui_group_hand_on(reply public.yui_messages) returns void
language plpgsql security definer set search_path = '' as $$
declare
  g jsonb := reply.meta -> 'group';
  root uuid := (g ->> 'root')::uuid;
  hop integer := (g ->> 'hop')::integer;
  t public.yui_threads;
  asker public.yui_agents;
  other record;
  reason text;
begin
  -- one reply at a time per group, so two agents answering at once can't both spend the
  -- budget's last turn
  select * into t from public.yui_threads where id = reply.thread_id for update;
  if t.archived_at is not null
     or (t.stopped_at is not null and coalesce(
           (select m.created_at from public.yui_messages m where m.id = root), '-infinity')
         < t.stopped_at)
     or not exists (select 1 from public.yui_thread_members tm
                    where tm.thread_id = t.id and tm.agent_id = reply.agent_id
                      and tm.left_at is null) then
    return;
  end if;
  select * into asker from public.yui_agents where id = reply.agent_id;
  for other in
    select * from public.yui_agents_named(reply.user_id, g -> 'mentions', reply.agent_id,
                                          array(select m.id from public.yui_group_members(t.id) m))
  loop
    reason := case when hop + 1 > t.max_hops then 'hops'
                   when public.yui_group_turns(t.id, root) >= t.max_turns then 'turns' end;
    if reason is null then
      perform public.yui_group_ask(t, other.id, hop + 1, root, asker, reply.id,
                                   reply.created_at, public.yui_plain(reply.body, 2000));
    else
      insert into public.yui_messages (user_id, agent_id, thread_id, sender, kind, body, meta)
      values (t.user_id, asker.id, t.id, 'agent', 'text',
        asker.name || ' wants to hand this to ' || other.name || ': "'
          || public.yui_plain(reply.body, 200) || '"' || E'\n' || 'Already '
          || case when reason = 'hops'
                  then hop || case when hop = 1 then ' handoff' else ' handoffs' end
                  else t.max_turns || case when t.max_turns = 1 then ' agent turn'
                                           else ' agent turns' end
             end || ' since your last message.',
        jsonb_build_object('group', jsonb_build_object(
          'thread', t.id, 'root', root, 'hop', hop,
          'guard', jsonb_build_object(
            'to', other.id, 'to_name', other.name, 'from', asker.id, 'msg', reply.id,
            'hop', hop + 1, 'reason', reason, 'state', 'held'))));
    end if;
  end loop;
end
$$;
revoke all on function public.yui_group_hand_on(public.yui_messages) from public;

-- Let it: the held ask goes out as if the person had written it (a fresh budget rooted at the
-- tap, hop 1), and the guard is spent. The accept trigger locked the guard and checked it is
-- still held; the member it asks must still be in the group.
create function public.yui_group_let_it(tap public.yui_messages) returns void
language plpgsql security definer set search_path = '' as $$
declare
  guard_id uuid := (tap.meta -> 'group' ->> 'guard')::uuid;
  held jsonb;
  t public.yui_threads;
  asker public.yui_agents;
begin
  select m.meta -> 'group' -> 'guard' into held from public.yui_messages m where m.id = guard_id;
  select * into t from public.yui_threads where id = tap.thread_id;
  select * into asker from public.yui_agents where id = (held ->> 'from')::uuid;
  if not exists (select 1 from public.yui_thread_members tm
                 where tm.thread_id = t.id and tm.agent_id = (held ->> 'to')::uuid
                   and tm.left_at is null) then
    raise exception 'group_guard_gone' using errcode = '22023';
  end if;
  perform public.yui_group_ask(t, (held ->> 'to')::uuid, 1, tap.id, asker,
    (held ->> 'msg')::uuid, tap.created_at,
    coalesce((select public.yui_plain(m.body, 2000) from public.yui_messages m
              where m.id = (held ->> 'msg')::uuid), ''));
  update public.yui_messages m
    set meta = jsonb_set(m.meta, '{group,guard}',
                         held || jsonb_build_object('state', 'continued', 'by', tap.id))
    where m.id = guard_id;
end
$$;
revoke all on function public.yui_group_let_it(public.yui_messages) from public;

-- Stop: chains rooted before it hand nothing on, asks not picked up yet are cancelled (marked
-- handled, so no host takes them), held guards are stopped, and one line in the lead's look
-- says what won't happen. A turn already running finishes; its @s go nowhere.
create function public.yui_group_stop(stop public.yui_messages) returns void
language plpgsql security definer set search_path = '' as $$
declare
  t public.yui_threads;
  cancelled uuid[];
  missed text;
begin
  select * into t from public.yui_threads where id = stop.thread_id for update;
  update public.yui_threads set stopped_at = stop.created_at where id = t.id;
  with dropped as (
    update public.yui_messages m
      set delivered_at = now(), handled_at = now(),
          meta = jsonb_set(m.meta, '{group,cancelled}', 'true')
      where m.thread_id = t.id and m.sender = 'user' and m.meta -> 'group' ? 'from'
        and m.delivered_at is null and m.created_at <= stop.created_at
      returning m.id, m.agent_id, m.created_at, m.meta -> 'group' ->> 'from_name' as asker
  )
  select array_agg(d.id order by d.created_at, d.id),
         string_agg(d.asker || '''s ask won''t reach ' || a.name, '; '
                    order by d.created_at, d.id)
    into cancelled, missed
  from dropped d join public.yui_agents a on a.id = d.agent_id;
  update public.yui_messages m
    set meta = jsonb_set(m.meta, '{group,guard,state}', '"stopped"')
    where m.thread_id = t.id and m.sender = 'agent'
      and m.meta -> 'group' -> 'guard' ->> 'state' = 'held';
  insert into public.yui_messages
    (user_id, agent_id, thread_id, sender, kind, body, meta, created_at)
  values (t.user_id, t.lead, t.id, 'agent', 'text',
    'Stopped. ' || coalesce(missed || '.', 'Nothing was waiting to be handed on.'),
    jsonb_build_object('group', jsonb_build_object(
      'thread', t.id, 'status', 'stopped', 'about', t.lead,
      'cancelled', to_jsonb(coalesce(cancelled, '{}')))),
    stop.created_at + interval '1 microsecond');
end
$$;
revoke all on function public.yui_group_stop(public.yui_messages) from public;

create function public.yui_group_route() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  g jsonb := new.meta -> 'group';
  t public.yui_threads;
  addressee uuid;
  n bigint;
  landed timestamptz;
begin
  if pg_trigger_depth() > 1 then
    return null;
  end if;
  if new.sender = 'agent' then
    if g ? 'mentions' then
      perform public.yui_group_hand_on(new);
    end if;
  elsif g ->> 'control' = 'continue' then
    perform public.yui_group_let_it(new);
  elsif g ->> 'control' = 'stop' then
    perform public.yui_group_stop(new);
  else
    -- the person's message: a copy for each addressee after the first (the same body, so
    -- each reads the same header and quote), and a status line for each that can't answer
    select * into t from public.yui_threads where id = new.thread_id;
    for addressee, n in
      select e.v::uuid, e.n from jsonb_array_elements_text(g -> 'to') with ordinality e(v, n)
      order by e.n
    loop
      landed := new.created_at;
      if n > 1 then
        insert into public.yui_messages (user_id, agent_id, thread_id, sender, kind, body, meta)
        values (new.user_id, addressee, t.id, 'user', new.kind, new.body,
                jsonb_build_object('group', jsonb_build_object(
                  'thread', t.id, 'root', new.id, 'hop', 0, 'copy_of', new.id)))
        returning created_at into landed;
      end if;
      perform public.yui_group_status(t, new.id, addressee, landed);
    end loop;
  end if;
  return null;
end
$$;
create trigger yui_group_route after insert on public.yui_messages
  for each row when (new.thread_id is not null)
  execute function public.yui_group_route();

-- A member who leaves can't be asked: guards holding an ask for it are gone.
create function public.yui_thread_members_left() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  update public.yui_messages m
    set meta = jsonb_set(m.meta, '{group,guard,state}', '"gone"')
    where m.thread_id = new.thread_id and m.sender = 'agent'
      and m.meta -> 'group' -> 'guard' ->> 'state' = 'held'
      and m.meta -> 'group' -> 'guard' ->> 'to' = new.agent_id::text;
  return null;
end
$$;
create trigger yui_thread_members_left after update of left_at on public.yui_thread_members
  for each row when (new.left_at is not null and old.left_at is null)
  execute function public.yui_thread_members_left();

-- --- notes for hosts -----------------------------------------------------------------------

-- What happened in a group besides the agent's own part, since its last turn there, for its
-- host to put before the agent's next turn: what the person asked others, what the others
-- answered, a Stop. The only way a host learns of other members' rows: it has no grant on the
-- group tables and reads only its own agents' rows. Only a host serving the agent, only while
-- the agent is a member; the newest 20, oldest first; never its own rows, guards or status
-- lines.
create function public.yui_group_notes(
  agent uuid, thread uuid, since timestamptz, upto timestamptz default null
) returns table (
  id uuid, created_at timestamptz, kind text, name text, to_names text, title text, words text
)
language sql stable security definer set search_path = '' as $$
  select notes.* from (
    select m.id, m.created_at,
      case when m.sender = 'agent' then 'answered'
           when m.meta -> 'group' ? 'control' then 'stopped'
           else 'asked' end as kind,
      case when m.sender = 'agent' then a.name end as name,
      (select string_agg(x.name, ', ' order by e.n)
       from jsonb_array_elements_text(m.meta -> 'group' -> 'to') with ordinality e(v, n)
       join public.yui_agents x on x.id = public.yui_uuid_or_null(e.v)
       where m.sender = 'user' and jsonb_typeof(m.meta -> 'group' -> 'to') = 'array')
        as to_names,
      t.title,
      case when m.sender = 'agent' then public.yui_plain(m.body, 600)
           else coalesce(public.yui_plain(m.meta -> 'group' ->> 'words', 600), '') end
        as words
    from public.yui_threads t
    join public.yui_thread_members tm
      on tm.thread_id = t.id and tm.agent_id = agent and tm.left_at is null
    join public.yui_messages m on m.thread_id = t.id
    join public.yui_agents a on a.id = m.agent_id
    where t.id = thread and t.user_id = public.yui_uid()
      and public.yui_caller() = 'yui_connector' and public.yui_connector_serves(agent)
      and m.created_at > since and (upto is null or m.created_at <= upto)
      and m.kind = 'text' and not public.yui_is_status(m.meta)
      and ((m.sender = 'agent' and m.agent_id <> agent and m.meta -> 'group' ? 'root')
           or (m.sender = 'user' and m.meta -> 'group' ? 'words'
               and not m.meta -> 'group' -> 'to' ? agent::text)
           or (m.sender = 'user' and m.meta -> 'group' ->> 'control' = 'stop'))
    order by m.created_at desc, m.id desc
    limit 20
  ) notes
  order by notes.created_at, notes.id
$$;
revoke all on function public.yui_group_notes(uuid, uuid, timestamptz, timestamptz) from public;
grant execute on function public.yui_group_notes(uuid, uuid, timestamptz, timestamptz)
  to yui_connector;
