-- Mentions (YUI-44): the person @s another of their agents from any thread, one hop, and the
-- database does the routing, so every kind of host works unchanged.
--
-- The app writes one row in the thread it is in (agent A): `[yui] mention to=<handle>` and the
-- words, with `meta.mention {to: <B's id>}`. In the same transaction:
--   1. A is not asked: the row lands delivered and handled. A's host reads it as a note on A's
--      next turn (`meta ? 'mention'`).
--   2. B gets a copy in its own thread, as the person's row: a `[yui] mention from=… by=person
--      msg=…` header, up to six lines of A's thread quoted, then the words, with
--      `meta.mentioned`. B's host answers it like any message.
--   3. B's answer (a reply whose `meta.turn` names the copy) is mirrored into A's thread with
--      `meta.mention_reply` and no `meta.turn`, so it starts nothing and isn't pushed twice.
--   4. If B can't answer now (asleep, offline, not listening, not on a computer yet, or
--      muted), one status row in B's name lands in A's thread right under the mention.
-- Agents @ each other only inside a turn the person started: a reply's `meta.mentions` is
-- honoured when its `meta.turn` names a row the person wrote in that thread and no copy of a
-- mention. So an agent answering a mention can never mention anyone: depth 1, no loops.
--
-- Trigger order on yui_messages after this migration (same-timing triggers fire in name
-- order, so the names are the order):
--   before insert: yui_mention_accept  checks the mention and marks it handled; before the
--                                      guard, so a malformed mention is refused as itself
--                  yui_messages_guard, yui_messages_owner, yui_reply_accept
--   after insert:  yui_mention_by_agent  an agent's @s (depth 1)
--                  yui_mention_mirror    B's answer back into A's thread
--                  yui_mention_send      the person's mention: B's copy and the status line
--                  yui_messages_notify, yui_messages_react
-- Rows these triggers write are ordinary inserts: they pass the guard and the owner check,
-- wake the live feed, and are skipped by every routing trigger (pg_trigger_depth() > 1), so a
-- copy, a mirror or a status line never routes again.

-- --- words for quotes and notes --------------------------------------------------------------

-- Each fenced block becomes one `[screen]` line, by the fence rules bridges/yuilines follows:
-- up to three spaces, three or more backticks or tildes, closed by at least as many of the
-- same; an unclosed fence runs to the end. Other fences (code) stay as they are.
create function public.yui_screens(body text) returns text
language plpgsql immutable strict set search_path = '' as $$
declare
  line text;
  opened text[];
  marker text;  -- the open fence's marker; null outside a fence
  is_screen boolean := false;
  lines text[] := '{}';
begin
  foreach line in array string_to_array(replace(body, E'\r', ''), E'\n') loop
    if marker is null then
      opened := regexp_match(line, '^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$');
      if opened is not null then
        marker := opened[1];
        is_screen := opened[2] = 'yui';
        lines := lines || case when is_screen then '[screen]' else line end;
      else
        lines := lines || line;
      end if;
    else
      if line ~ '^ {0,3}(`+|~+)[ \t]*$' and left(btrim(line), 1) = left(marker, 1)
         and char_length(btrim(line)) >= char_length(marker) then
        marker := null;
        if is_screen then
          continue;
        end if;
      end if;
      if not is_screen then
        lines := lines || line;
      end if;
    end if;
  end loop;
  return array_to_string(lines, E'\n');
end
$$;

-- A message as one plain line of at most `n` characters: the app's `[yui] mention …` or
-- `[yui] reply …` first line dropped, screens as `[screen]`, whitespace squashed.
create function public.yui_plain(body text, n integer) returns text
language sql immutable strict set search_path = '' as $$
  select case when char_length(t) > n then left(t, n - 1) || '…' else t end
  from (select btrim(regexp_replace(public.yui_screens(
                 regexp_replace(body, '^(\[yui\] (mention|reply) [^\n]*(\n|$))+', '')),
               '\s+', ' ', 'g')) as t) plain
$$;

-- Rows that say something about the conversation rather than in it: the bridge's own quiet
-- lines, mention and group status lines, guard rows. Never quoted, never a note.
create function public.yui_is_status(meta jsonb) returns boolean
language sql immutable set search_path = '' as $$
  select meta ? 'status' or coalesce(meta -> 'mention_reply' ? 'status', false)
    or coalesce(meta -> 'group' ? 'status', false) or coalesce(meta -> 'group' ? 'guard', false)
$$;

-- --- can the agent answer now? ---------------------------------------------------------------

-- The one presence rule (0006), for a single agent, whoever asks.
create function public.yui_agent_presence(agent uuid) returns text
language sql stable security definer set search_path = '' as $$
  select public.yui_presence(a.connector_id, c.revoked_at, c.stopped_at, c.last_seen_at,
                             c.serving_at, a.bound_at, a.served_at)
  from public.yui_agents a left join public.yui_connectors c on c.id = a.connector_id
  where a.id = agent
$$;
revoke all on function public.yui_agent_presence(uuid) from public;

-- Why the agent won't answer at once (asleep, offline, not_listening, pending, muted), or
-- null when it will.
create function public.yui_reach_status(agent uuid) returns text
language sql stable security definer set search_path = '' as $$
  select case
    when public.yui_agent_presence(a.id) <> 'online' then public.yui_agent_presence(a.id)
    when a.push_muted then 'muted'
  end
  from public.yui_agents a where a.id = agent
$$;
revoke all on function public.yui_reach_status(uuid) from public;

-- The status line's words. Product copy: one sentence saying where the message is and when
-- it goes through, never an error.
create function public.yui_status_sentence(name text, status text) returns text
language sql immutable set search_path = '' as $$
  select name || case status
    when 'asleep' then '''s computer is asleep. This waits for it and goes through when it wakes.'
    when 'offline' then ' is offline. This waits for it and goes through when it''s back.'
    when 'pending' then ' isn''t on a computer yet.'
                        ' This waits for it and goes through once it''s paired.'
    when 'not_listening' then '''s bridge isn''t running yet.'
                              ' This waits for it and goes through once it starts.'
    when 'muted' then ' is muted.'
                      ' This still reaches it, and its answer comes in here without a sound.'
  end
$$;

-- The agents a reply's `meta.mentions` names: the first three entries, `@` and case ignored,
-- each a handle or a name (a handle wins over a name), of the same person, never the asker,
-- each agent once, in the order named. `among` narrows it to a group's members (0013).
create function public.yui_agents_named(
  owner uuid, names jsonb, asker uuid, among uuid[] default null
) returns table (id uuid, name text, handle text)
language sql stable security definer set search_path = '' as $$
  select found.id, found.name, found.handle
  from (
    select distinct on (picked.id) picked.*
    from (
      select distinct on (wanted.n) a.id, a.name, a.handle, wanted.n
      from (
        select lower(ltrim(btrim(x.value), '@')) as word, x.n
        from jsonb_array_elements_text(
               case when jsonb_typeof(names) = 'array' then names else '[]' end)
             with ordinality as x(value, n)
        where x.n <= 3
      ) wanted
      join public.yui_agents a
        on a.user_id = owner and a.id <> asker and (among is null or a.id = any (among))
       and (a.handle = wanted.word or lower(a.name) = wanted.word)
      order by wanted.n, (a.handle = wanted.word) desc
    ) picked
    order by picked.id, picked.n
  ) found
  order by found.n
$$;
revoke all on function public.yui_agents_named(uuid, jsonb, uuid, uuid[]) from public;

-- Up to six lines of an agent's own thread at or before `upto` (not `skip`, not status
-- lines, not group rows), oldest first, under one heading; null for an empty thread.
create function public.yui_mention_context(agent uuid, upto timestamptz, skip uuid)
returns text
language sql stable security definer set search_path = '' as $$
  select 'Earlier in ' || min(recent.thread_name) || '''s thread:'
         || string_agg(E'\n> ' || recent.line, '' order by recent.created_at, recent.id)
  from (
    select m.created_at, m.id, a.name as thread_name,
           case when m.sender = 'user' then 'The person'
                else coalesce(m.meta -> 'mention_reply' ->> 'name', a.name)
           end || ': ' || public.yui_plain(m.body, 200) as line
    from public.yui_messages m
    join public.yui_agents a on a.id = m.agent_id
    where m.agent_id = agent and m.kind = 'text' and m.id <> skip and m.created_at <= upto
      and not m.meta ? 'group' and not public.yui_is_status(m.meta)
    order by m.created_at desc, m.id desc
    limit 6
  ) recent
$$;
revoke all on function public.yui_mention_context(uuid, timestamptz, uuid) from public;

-- B's copy of a mention, and the status line in A's thread when B can't answer now.
-- `source` is the row the mention came from: the person's row, or the agent's reply.
create function public.yui_mention_deliver(
  source public.yui_messages, target uuid, words text, by_ text
) returns void
language plpgsql security definer set search_path = '' as $$
declare
  asker public.yui_agents;
  other public.yui_agents;
  context text;
  status text;
begin
  select * into asker from public.yui_agents where id = source.agent_id;
  select * into other from public.yui_agents where id = target;
  context := public.yui_mention_context(source.agent_id, source.created_at, source.id);
  insert into public.yui_messages (user_id, agent_id, sender, kind, body, meta)
  values (source.user_id, target, 'user', 'text',
    left('[yui] mention from=' || asker.handle || ' by=' || by_ || ' msg=' || source.id
         || E'\n' || coalesce(context || E'\n', '')
         || coalesce(nullif(words, ''), '@' || other.handle), 32000),
    jsonb_build_object('mentioned', jsonb_build_object(
      'from', asker.id, 'from_name', asker.name, 'from_handle', asker.handle,
      'msg', source.id, 'by', by_, 'depth', 1)));
  status := public.yui_reach_status(target);
  if status is not null then
    -- a microsecond after the row it is about, so it sorts right under it
    insert into public.yui_messages (user_id, agent_id, sender, kind, body, meta, created_at)
    values (source.user_id, source.agent_id, 'agent', 'text',
      public.yui_status_sentence(other.name, status),
      jsonb_build_object('mention_reply', jsonb_build_object(
        'agent', other.id, 'name', other.name, 'handle', other.handle,
        'status', status, 'to', source.id)),
      source.created_at + interval '1 microsecond');
  end if;
end
$$;
revoke all on function public.yui_mention_deliver(public.yui_messages, uuid, text, text)
  from public;

-- --- the person's mention ------------------------------------------------------------------

create function public.yui_mention_accept() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  target uuid;
  other public.yui_agents;
begin
  if public.yui_message_exists(new.id) then
    return new;
  end if;
  target := public.yui_uuid_or_null(new.meta -> 'mention' ->> 'to');
  if target is null then
    raise exception 'mention_needs_agent' using errcode = '22023';
  end if;
  select * into other from public.yui_agents a
    where a.id = target and a.user_id = new.user_id and a.id is distinct from new.agent_id;
  if not found then
    raise exception 'mention_agent_not_found' using errcode = '22023';
  end if;
  -- the handle and name are the relay's, whatever the app sent
  new.meta := new.meta || jsonb_build_object('mention', jsonb_build_object(
    'to', other.id, 'handle', other.handle, 'name', other.name));
  new.delivered_at := now();
  new.handled_at := now();
  return new;
end
$$;
create trigger yui_mention_accept before insert on public.yui_messages
  for each row when (new.sender = 'user' and new.meta ? 'mention')
  execute function public.yui_mention_accept();

create function public.yui_mention_send() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if pg_trigger_depth() > 1 then
    return null;
  end if;
  perform public.yui_mention_deliver(
    new, (new.meta -> 'mention' ->> 'to')::uuid,
    btrim(regexp_replace(new.body, '^(\[yui\] (mention|reply) [^\n]*(\n|$))+', '')), 'person');
  return null;
end
$$;
create trigger yui_mention_send after insert on public.yui_messages
  for each row when (new.sender = 'user' and new.meta ? 'mention')
  execute function public.yui_mention_send();

-- --- the answer, mirrored back ---------------------------------------------------------------

-- One mirror per thread a mention came from, even when one reply answers several copies.
-- A source agent deleted meanwhile gets nothing (its thread is gone with it).
create function public.yui_mention_mirror() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  me public.yui_agents;
begin
  if pg_trigger_depth() > 1 or jsonb_typeof(new.meta -> 'turn') is distinct from 'array' then
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
    from public.yui_messages m
    where m.id in (select public.yui_uuid_or_null(t)
                   from jsonb_array_elements_text(new.meta -> 'turn') t)
      and m.user_id = new.user_id and m.agent_id = new.agent_id
      and m.sender = 'user' and m.meta ? 'mentioned'
    order by m.meta -> 'mentioned' ->> 'from', m.created_at desc
  ) copy
  where exists (select 1 from public.yui_agents a
                where a.id = copy.source_agent and a.user_id = new.user_id);
  return null;
end
$$;
create trigger yui_mention_mirror after insert on public.yui_messages
  for each row when (new.sender = 'agent' and new.meta ? 'turn'
                     and not new.meta ? 'mention_reply')
  execute function public.yui_mention_mirror();

-- --- agents @ing each other, depth 1 -----------------------------------------------------------

create function public.yui_mention_by_agent() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  turn uuid[];
  other record;
begin
  if pg_trigger_depth() > 1 or jsonb_typeof(new.meta -> 'turn') is distinct from 'array' then
    return null;
  end if;
  turn := array(select public.yui_uuid_or_null(t)
                from jsonb_array_elements_text(new.meta -> 'turn') t);
  -- a turn the person started: it names a row the person wrote in this thread...
  if not exists (select 1 from public.yui_messages m
                 where m.id = any (turn) and m.user_id = new.user_id
                   and m.agent_id = new.agent_id and m.sender = 'user'
                   and not m.meta ? 'group') then
    return null;
  end if;
  -- ...and no copy of a mention: an agent answering a mention mentions no one
  if exists (select 1 from public.yui_messages m
             where m.id = any (turn) and m.meta ? 'mentioned') then
    return null;
  end if;
  for other in
    select * from public.yui_agents_named(new.user_id, new.meta -> 'mentions', new.agent_id)
  loop
    perform public.yui_mention_deliver(new, other.id, public.yui_plain(new.body, 2000), 'agent');
  end loop;
  return null;
end
$$;
create trigger yui_mention_by_agent after insert on public.yui_messages
  for each row when (new.sender = 'agent' and new.meta ? 'mentions' and new.meta ? 'turn')
  execute function public.yui_mention_by_agent();
