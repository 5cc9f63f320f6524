-- Group threads (YUI-93), part 1: the tables, who may do what with them, and the person's
-- group row on its way in. Part 2 (0013_groups_route.sql) routes what lands: copies,
-- handoffs, guards, Let it, Stop, and the notes hosts read.
--
-- A group is its own thread id, but rows stay per agent: every group row still has the
-- agent_id it is to or from, so a host's poll, acks and `meta.turn` work unchanged, and a host
-- still reads only its own agents' rows. Hosts get no grant on either table; what an agent
-- knows of the others is the quote in its own row, and `yui_group_notes` (part 2).
--
-- The person's row. The app writes the words with `thread_id` and `meta.group.to` (up to three
-- members; none means the lead, or the author of the message it replies to). The trigger
-- below sends it to the first addressee and rewrites the body: a `[yui] group "<title>"
-- thread=… with=… lead=… hop=0 from=person msg=<id>` header, up to six lines of the group
-- quoted, then the words, which stay in `meta.group.words` for the app to draw. Taps keep
-- their agent (a screen belongs to the agent that sent it) and their event line.
-- Let it and Stop are rows too (`meta.group.control`): they land handled in the lead's
-- thread, so no agent is asked and the phone's outbox sends them like any message.
-- An agent's reply is stamped with the group of the newest row its `meta.turn` names, and its
-- `meta.mentions` moves into `meta.group.mentions`, where part 2 routes it by the budget
-- instead of as a depth-1 mention. `meta.group` is only ever written by the database.
--
-- Trigger order on yui_messages after this migration (same-timing triggers fire in name
-- order, so the names are the order):
--   before insert: yui_group_accept      routes the person's group row, stamps replies,
--                                        drops a forged meta.group; first, because it picks
--                                        the row's agent, which every later trigger reads
--                  yui_mention_accept    a mention (refused inside a group, above)
--                  yui_messages_guard    rates and suspension, charged to the final sender
--                  yui_messages_owner    the final agent is the person's
--                  yui_reply_accept      the replied row, within the final thread or group
--   after insert:  yui_group_route       copies, handoffs, guards, Let it, Stop (part 2)
--                  yui_mention_by_agent  solo @s, depth 1 (group replies never get here:
--                                        their @s were moved into meta.group)
--                  yui_mention_mirror, yui_mention_send
--                  yui_messages_notify   the live feed (delivered at commit, so after all)
--                  yui_messages_react    the emoji onto the agent row
-- Rows written by triggers pass the guard, the owner check and the notify, and every routing
-- trigger skips them (pg_trigger_depth() > 1): nothing a trigger writes routes again.

insert into public.yui_limits (name, value, note) values
  ('threads_per_user', 50, 'group threads per account, archived ones included'),
  ('members_per_group', 12, 'agents in one group thread at once'),
  -- The reference keeps this high until its phone app can make groups. Here `yui app` is the
  -- app and makes them, so 0 means any account may; a relay serving older phones raises it.
  ('group_min_build', 0, 'oldest app build (newest phone on the account) that may make a group')
on conflict (name) do nothing;

create table public.yui_threads (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  title text not null check (char_length(btrim(title)) between 1 and 60),
  lead uuid not null,  -- answers whatever isn't addressed, so a group never goes quiet
  max_hops integer not null default 3 check (max_hops between 1 and 5),
  max_turns integer not null default 8 check (max_turns between 1 and 12),
  stopped_at timestamptz,  -- the last Stop: chains rooted before it hand nothing on
  created_at timestamptz not null default now(),
  archived_at timestamptz,  -- the app's delete: the rows stay, nobody can write
  unique (id, user_id),
  foreign key (lead, user_id) references public.yui_agents (id, user_id) on delete cascade
);
create index yui_threads_user_idx on public.yui_threads (user_id, created_at);

create table public.yui_thread_members (
  thread_id uuid not null,
  agent_id uuid not null,
  user_id uuid not null,
  joined_at timestamptz not null default now(),
  left_at timestamptz,
  primary key (thread_id, agent_id),
  foreign key (thread_id, user_id) references public.yui_threads (id, user_id)
    on delete cascade,
  foreign key (agent_id, user_id) references public.yui_agents (id, user_id) on delete cascade
);
create index yui_thread_members_agent_idx on public.yui_thread_members (agent_id);

-- The person reads, makes and edits their own groups; never deletes (archive instead) and
-- never sets stopped_at (only a Stop row does). Hosts get nothing at all.
alter table public.yui_threads enable row level security;
alter table public.yui_thread_members enable row level security;
revoke all on public.yui_threads, public.yui_thread_members
  from public, anon, yui_user, yui_connector;
grant select on public.yui_threads, public.yui_thread_members to yui_user;
grant insert (id, user_id, title, lead, max_hops, max_turns) on public.yui_threads to yui_user;
grant update (title, lead, max_hops, max_turns, archived_at) on public.yui_threads to yui_user;
grant insert (thread_id, agent_id, user_id) on public.yui_thread_members to yui_user;
grant update (left_at) on public.yui_thread_members to yui_user;
create policy yui_threads_owner on public.yui_threads for all to yui_user
  using (user_id = public.yui_uid()) with check (user_id = public.yui_uid());
create policy yui_thread_members_owner on public.yui_thread_members for all to yui_user
  using (user_id = public.yui_uid()) with check (user_id = public.yui_uid());

-- Making a group: an app build that can draw one, a live account, room under the cap.
-- Changing the lead: only to a member. Direct SQL (no claims) is exempt, as with every guard.
create function public.yui_threads_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  need numeric;
begin
  new.title := btrim(regexp_replace(new.title, '\s+', ' ', 'g'));
  if tg_op = 'UPDATE' then
    if new.lead is distinct from old.lead and not exists (
        select 1 from public.yui_thread_members tm
        where tm.thread_id = new.id and tm.agent_id = new.lead and tm.left_at is null) then
      raise exception 'group_lead_not_member' using errcode = '22023';
    end if;
    return new;
  end if;
  if not public.yui_limited_caller() then
    return new;
  end if;
  if exists (select 1 from public.yui_users u where u.id = new.user_id
             and u.suspended_at is not null) then
    raise exception 'account_suspended' using errcode = 'PT403';
  end if;
  need := coalesce(public.yui_limit('group_min_build'), 0);
  if need > 0 and coalesce((select max(d.app_build) from public.yui_devices d
                            where d.user_id = new.user_id), 0) < need then
    raise exception 'update_needed' using errcode = 'PT403', detail = 'group_min_build';
  end if;
  if (select count(*) from public.yui_threads t where t.user_id = new.user_id)
     >= coalesce(public.yui_limit('threads_per_user'), 'infinity') then
    raise exception 'limit_reached' using errcode = 'PT403', detail = 'yui_threads';
  end if;
  return new;
end
$$;
create trigger yui_threads_guard before insert or update on public.yui_threads
  for each row execute function public.yui_threads_guard();

-- The lead is the first member.
create function public.yui_threads_seat_lead() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  insert into public.yui_thread_members (thread_id, agent_id, user_id)
  values (new.id, new.lead, new.user_id);
  return null;
end
$$;
create trigger yui_threads_seat_lead after insert on public.yui_threads
  for each row execute function public.yui_threads_seat_lead();

-- A seat under the cap (joining, or coming back after leaving); the lead can't leave.
create function public.yui_thread_members_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if tg_op = 'UPDATE' and new.left_at is not null and old.left_at is null
     and exists (select 1 from public.yui_threads t
                 where t.id = new.thread_id and t.lead = new.agent_id) then
    raise exception 'group_lead_cannot_leave' using errcode = '22023';
  end if;
  if new.left_at is null and (tg_op = 'INSERT' or old.left_at is not null)
     and (select count(*) from public.yui_thread_members tm
          where tm.thread_id = new.thread_id and tm.left_at is null)
         >= coalesce(public.yui_limit('members_per_group'), 'infinity') then
    raise exception 'limit_reached' using errcode = 'PT403', detail = 'yui_thread_members';
  end if;
  return new;
end
$$;
create trigger yui_thread_members_guard before insert or update on public.yui_thread_members
  for each row execute function public.yui_thread_members_guard();

-- --- group rows in yui_messages --------------------------------------------------------------

alter table public.yui_messages
  add column thread_id uuid,
  add constraint yui_messages_thread_fk foreign key (thread_id, user_id)
    references public.yui_threads (id, user_id) on delete cascade,
  -- a control row (Stop, Controls) is per agent; a group's Stop is a group row of its own
  add constraint yui_messages_thread_kind check (thread_id is null or kind <> 'control');
create index yui_messages_group_idx on public.yui_messages (thread_id, created_at)
  where thread_id is not null;
create index yui_messages_group_root_idx
  on public.yui_messages (thread_id, (meta #>> '{group,root}')) where thread_id is not null;

-- The person writes into a group only through its members (the trigger has already picked
-- the member the row goes to). Restrictive, so it holds whatever permissive policy the
-- person's writes get elsewhere.
create policy yui_messages_user_group on public.yui_messages as restrictive
  for insert to yui_user
  with check (yui_messages.thread_id is null or exists (
    select 1 from public.yui_thread_members tm
    where tm.thread_id = yui_messages.thread_id and tm.agent_id = yui_messages.agent_id
      and tm.user_id = public.yui_uid() and tm.left_at is null));

-- The group's members now, the lead first.
create function public.yui_group_members(thread uuid)
returns table (id uuid, name text, handle text)
language sql stable security definer set search_path = '' as $$
  select a.id, a.name, a.handle
  from public.yui_thread_members tm
  join public.yui_threads t on t.id = tm.thread_id
  join public.yui_agents a on a.id = tm.agent_id
  where tm.thread_id = thread and tm.left_at is null
  order by a.id = t.lead desc, tm.joined_at, a.handle
$$;
revoke all on function public.yui_group_members(uuid) from public;

-- The first line of every row that asks an agent something in a group: the person's message,
-- its copies and every handoff have the same shape.
create function public.yui_group_header(
  t public.yui_threads, hop integer, from_who text, msg uuid
) returns text
language sql stable security definer set search_path = '' as $$
  select '[yui] group "' || replace(replace(t.title, '\', '\\'), '"', '\"') || '"'
         || ' thread=' || t.id
         || ' with=' || (select string_agg(m.handle, ',') from public.yui_group_members(t.id) m)
         || ' lead=' || (select a.handle from public.yui_agents a where a.id = t.lead)
         || ' hop=' || hop || ' from=' || from_who || ' msg=' || msg
$$;
revoke all on function public.yui_group_header(public.yui_threads, integer, text, uuid)
  from public;

-- Up to six lines of the group's conversation at or before `upto`: the person's messages (by
-- their words) and the agents' answers; not copies, handoff asks, controls or status lines.
create function public.yui_group_context(t public.yui_threads, upto timestamptz, skip uuid)
returns text
language sql stable security definer set search_path = '' as $$
  select 'Earlier in ' || t.title || ':'
         || string_agg(E'\n> ' || recent.line, '' order by recent.created_at, recent.id)
  from (
    select m.created_at, m.id,
           case when m.sender = 'user'
                then 'The person: ' || public.yui_plain(m.meta -> 'group' ->> 'words', 200)
                else a.name || ': ' || public.yui_plain(m.body, 200)
           end as line
    from public.yui_messages m
    join public.yui_agents a on a.id = m.agent_id
    where m.thread_id = t.id and m.kind = 'text' and m.created_at <= upto
      and m.id is distinct from skip and not public.yui_is_status(m.meta)
      and ((m.sender = 'user' and m.meta -> 'group' ? 'words')
           or (m.sender = 'agent' and m.meta -> 'group' ? 'root'))
    order by m.created_at desc, m.id desc
    limit 6
  ) recent
  having count(*) > 0
$$;
revoke all on function public.yui_group_context(public.yui_threads, timestamptz, uuid)
  from public;

-- The whole body of a row that asks an agent: header, the quote, then the words.
create function public.yui_group_body(
  t public.yui_threads, hop integer, from_who text, msg uuid, upto timestamptz, words text
) returns text
language sql stable security definer set search_path = '' as $$
  select left(public.yui_group_header(t, hop, from_who, msg) || E'\n'
              || coalesce(public.yui_group_context(t, upto, msg) || E'\n', '') || words, 32000)
$$;
revoke all on function public.yui_group_body(
  public.yui_threads, integer, text, uuid, timestamptz, text) from public;

-- The app's first line of a reply (the chip it draws from meta.reply_to) is not words.
create function public.yui_without_reply_line(body text) returns text
language sql immutable set search_path = '' as $$
  select btrim(regexp_replace(body, '^\[yui\] reply [^\n]*(\n|$)', ''))
$$;

create function public.yui_group_accept() returns trigger
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
      where m.id in (select public.yui_uuid_or_null(x)
                     from jsonb_array_elements_text(new.meta -> 'turn') x)
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
create trigger yui_group_accept before insert on public.yui_messages
  for each row when (new.thread_id is not null or new.meta ? 'group'
                     or (new.sender = 'agent' and new.meta ? 'turn'))
  execute function public.yui_group_accept();

-- Replies within a group: the replied row may be any of the group's rows, whichever member
-- the reply goes to (0011 knew only the agent's own thread).
create or replace function public.yui_reply_accept() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  reply jsonb := new.meta -> 'reply_to';
  target uuid;
  author text;
begin
  if public.yui_message_exists(new.id) then
    return new;
  end if;
  if jsonb_typeof(reply) is distinct from 'object' then
    raise exception 'reply_needs_msg' using errcode = '22023';
  end if;
  target := public.yui_uuid_or_null(reply ->> 'msg');
  if target is null then
    raise exception 'reply_needs_msg' using errcode = '22023';
  end if;
  select m.sender into author from public.yui_messages m
    where m.id = target and m.user_id = new.user_id
      and (m.agent_id = new.agent_id
           or (new.thread_id is not null and m.thread_id = new.thread_id));
  if not found then
    raise exception 'reply_msg_not_found' using errcode = '22023';
  end if;
  new.meta := new.meta || jsonb_build_object('reply_to', jsonb_build_object(
    'msg', target,
    'from', author,
    'quote', left(btrim(regexp_replace(coalesce(reply ->> 'quote', ''), '\s+', ' ', 'g')), 120)));
  return new;
end
$$;
