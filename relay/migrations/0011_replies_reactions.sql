-- Replies and reactions: two things the person does to a message that is already there.
--
-- A reply (hold a message, tap Reply) is an ordinary row whose body starts with one line the
-- app writes, `[yui] reply to=<id> from=agent|user quote="…"`, then the person's words; meta
-- carries the same `reply_to {msg, from, quote}`. The body reaches the agent as written; the
-- relay only checks the row it points at and keeps meta honest (who wrote that row, a quote of
-- at most 120 characters).
--
-- A reaction (hold an agent's message, pick one of six) is an event row, `[yui] react
-- msg=<id> emoji=… meaning="…"` and the start of that message quoted, with `meta.react {msg,
-- emoji}`. It is a turn like any tap; on the way in, the emoji is copied onto the reacted row's
-- `reaction` column (null emoji: taken back), so the app draws it without reading events.
--
-- Trigger order on yui_messages after this migration. PostgreSQL fires triggers of the same
-- timing in name order, so the names are the order:
--   before insert: yui_messages_guard (rates), yui_messages_owner (the agent is the person's),
--                  yui_reply_accept (checks the replied row once the row's thread is final)
--   after insert:  yui_messages_notify (the live feed), yui_messages_react (the emoji)
-- 0012 and 0013 add their own and repeat the whole order at their top.

-- A uuid written as text, or null: meta is JSON the client wrote, so nothing is trusted to cast.
create function public.yui_uuid_or_null(value text) returns uuid
language sql immutable set search_path = '' as $$
  select case
    when value ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
    then value::uuid
  end
$$;

-- A row that already landed (same id) is left alone by every accept trigger, so a resend
-- always reaches the primary key and answers 409, never a validation error.
create function public.yui_message_exists(row_id uuid) returns boolean
language sql stable security definer set search_path = '' as $$
  select exists (select 1 from public.yui_messages m where m.id = row_id)
$$;
revoke all on function public.yui_message_exists(uuid) from public;

-- --- reactions -------------------------------------------------------------------------------

alter table public.yui_messages
  add column reaction text,
  add column reacted_at timestamptz,
  -- only an agent's row wears a reaction; hosts have no grant on either column, and the
  -- person can't update rows, so only the trigger below ever sets them
  add constraint yui_messages_reaction_check check (
    (reaction is null or (sender = 'agent'
                          and reaction in ('👍', '👎', '🤔', '❤️', '⏳', '🔥')))
    and (reacted_at is null or sender = 'agent'));

-- One of the six, as stored; a heart without its emoji variation selector counts as the heart.
create function public.yui_reaction_emoji(value text) returns text
language sql immutable set search_path = '' as $$
  select case
    when btrim(value) in ('❤', '❤️') then '❤️'
    when btrim(value) in ('👍', '👎', '🤔', '⏳', '🔥') then btrim(value)
  end
$$;

-- After the insert, so a refusal (400) rolls the event row back with it, and a resend never
-- gets here (the primary key refuses it first). Newest wins: an older reaction that arrives
-- late from the phone's outbox doesn't undo a newer one.
create function public.yui_messages_react() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  react jsonb := new.meta -> 'react';
  target uuid;
  emoji text;
begin
  if jsonb_typeof(react) is distinct from 'object' then
    raise exception 'react_needs_msg' using errcode = '22023';
  end if;
  target := public.yui_uuid_or_null(react ->> 'msg');
  if target is null then
    raise exception 'react_needs_msg' using errcode = '22023';
  end if;
  if nullif(react ->> 'emoji', '') is not null then
    emoji := public.yui_reaction_emoji(react ->> 'emoji');
    if emoji is null then
      raise exception 'unknown_reaction' using errcode = '22023';
    end if;
  end if;
  -- the reacted row is the agent's, in this very thread (a reaction is that agent's turn)
  if not exists (select 1 from public.yui_messages m
                 where m.id = target and m.user_id = new.user_id
                   and m.agent_id = new.agent_id and m.sender = 'agent') then
    raise exception 'react_msg_not_found' using errcode = '22023';
  end if;
  update public.yui_messages m set reaction = emoji, reacted_at = new.created_at
    where m.id = target and (m.reacted_at is null or m.reacted_at <= new.created_at);
  return null;
end
$$;
create trigger yui_messages_react after insert on public.yui_messages
  for each row when (new.sender = 'user' and new.kind = 'event' and new.meta ? 'react')
  execute function public.yui_messages_react();

-- --- replies ---------------------------------------------------------------------------------

-- The replied row must be in the thread the reply goes to (0013 widens this to a group's rows).
-- `from` is taken from that row, not from the app, and the quote is one line of at most 120
-- characters.
create function public.yui_reply_accept() returns trigger
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
      and m.agent_id = new.agent_id;
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
create trigger yui_reply_accept before insert on public.yui_messages
  for each row when (new.sender = 'user' and new.meta ? 'reply_to')
  execute function public.yui_reply_accept();
