-- Realtime hears updates and deletes of yui_messages, not only inserts (issue 15).
--
-- The person's ticks (✓ delivered, ✓✓ handled) and an agent row's reaction are updates; the
-- official clients subscribe to UPDATE or `*` and expect them. As for inserts (0004), the
-- notification carries what happened and ids only: the feed reads the row under each
-- subscriber's own claims, so a notification never leaks a body.
--
-- An update that changes nothing tells nobody. A delete is told only when a person or a host
-- deletes through the API (the role of the request): housekeeping (`yui_retention`, a removed
-- agent or person, whose cascades run as the table's owner) can remove thousands of rows at
-- once and tells no one, so a sweep never floods the feed or holds a notification per row in
-- memory. A deleted row can't be read under anyone's claims; the feed gives its id to the
-- person whose thread it was (realtime_feed.py).

create function public.yui_messages_changed() returns trigger
language plpgsql set search_path = '' as $$
declare
  changed public.yui_messages;
begin
  if tg_op = 'DELETE' then
    if current_user not in ('yui_user', 'yui_connector') then
      return null;
    end if;
    changed := old;
  else
    changed := new;
  end if;
  perform pg_notify('yui_messages', json_build_object('op', tg_op, 'id', changed.id,
    'user_id', changed.user_id, 'agent_id', changed.agent_id)::text);
  return null;
end
$$;
-- A trigger function needs no grant (0020): nobody executes it but its triggers.
revoke all on function public.yui_messages_changed() from public;

create trigger yui_messages_updated after update on public.yui_messages
  for each row when (old.* is distinct from new.*)
  execute function public.yui_messages_changed();
create trigger yui_messages_deleted after delete on public.yui_messages
  for each row execute function public.yui_messages_changed();
