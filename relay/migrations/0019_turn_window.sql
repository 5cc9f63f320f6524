-- A reply's turn, bounded in time (issue 14).
--
-- A reply names the person's rows it answers in `meta.turn`, and what it sets off rests on
-- them: its @s become copies in other agents' threads (0012), its answer to a mention is
-- mirrored into the thread the mention came from (0012), its @s in a group become handoffs
-- (0014). Any row ever written used to count, so a host could name an old, long finished row
-- and drop a copy into a sibling's thread whenever it liked; the spec allows an agent's @ only
-- inside a turn the person started.
--
-- Now a turn row counts only while it is open: its agent hasn't finished it (handled_at is
-- null) or finished it less than the turn window ago (`turn_window_seconds`, 5 minutes).
-- The bridges here write a turn's replies before they ack its rows, so they never need the
-- window; it is there for hosts that ack first and answer after (the reference's older hosts),
-- and for a reply retried from an outbox after its ack: retry waits grow to 60 s, so five
-- minutes still lets four full waits through, and is short enough that "whenever the host
-- likes" becomes "only right after the person spoke".
--
-- A reply naming a turn that is no longer open is still accepted (201) and drawn where it
-- always was; only what it would set off is dropped: no copy, no mirror, no handoff. Refusing
-- it instead would cost the person a real answer over a side effect: a bridge reads a 4xx on
-- a reply as "refused for good" and drops it.
--
-- The window is only as good as handled_at, which hosts write: from now on a host's ack is
-- stamped with the relay's clock (a post-dated ack can't hold a turn open), the first ack
-- stays (a repeated ack changes nothing, so an old turn can't be refreshed), and a handled
-- row is never made unhandled again (an old turn can't be reopened). Direct SQL and the
-- service role are exempt, as from every guard.

insert into public.yui_limits (name, value, note) values
  ('turn_window_seconds', 300,
   'a reply''s @ mentions, mention answers and group handoffs count only while its turn is '
   'unfinished or finished less than this long ago')
on conflict (name) do nothing;

-- The rows of a reply's turn that are still open: the person's rows in the reply's own thread
-- that their agent hasn't finished, or finished within the window.
create function public.yui_turn_open(reply public.yui_messages)
returns setof public.yui_messages
language sql stable security definer set search_path = '' as $$
  select m.*
  from public.yui_messages m
  where m.id in (select public.yui_uuid_or_null(t)
                 from jsonb_array_elements_text(
                        case when jsonb_typeof(reply.meta -> 'turn') = 'array'
                             then reply.meta -> 'turn' else '[]' end) t)
    and m.user_id = reply.user_id and m.agent_id = reply.agent_id and m.sender = 'user'
    and (m.handled_at is null
         or m.handled_at > now() - make_interval(
              secs => coalesce(public.yui_limit('turn_window_seconds'), 300)::double precision))
$$;
revoke all on function public.yui_turn_open(public.yui_messages) from public;

-- A host's ack: stamped now, once, for good.
create function public.yui_messages_ack() returns trigger
language plpgsql set search_path = '' as $$
begin
  if public.yui_caller() = 'yui_connector' then
    new.handled_at := case when old.handled_at is not null then old.handled_at
                           when new.handled_at is not null then now() end;
  end if;
  return new;
end
$$;
revoke all on function public.yui_messages_ack() from public;
create trigger yui_messages_ack before update of handled_at on public.yui_messages
  for each row execute function public.yui_messages_ack();

-- --- 0012's agent @s and mirrors, counting open turn rows only ---------------------------------

create or replace function public.yui_mention_by_agent() returns trigger
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
  -- a turn the person started: it names an open row the person wrote in this thread...
  if not exists (select 1 from public.yui_turn_open(new) m where not m.meta ? 'group') then
    return null;
  end if;
  -- ...and no copy of a mention, open or not: an agent answering a mention mentions no one
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

create or replace function public.yui_mention_mirror() returns trigger
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
    from public.yui_turn_open(new) m
    where m.meta ? 'mentioned'
    order by m.meta -> 'mentioned' ->> 'from', m.created_at desc
  ) copy
  where exists (select 1 from public.yui_agents a
                where a.id = copy.source_agent and a.user_id = new.user_id);
  return null;
end
$$;

-- --- 0014's routing: a reply hands on only from an open row of its group ----------------------

create or replace function public.yui_group_route() returns trigger
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
    if g ? 'mentions' and exists (select 1 from public.yui_turn_open(new) m
                                  where m.thread_id = new.thread_id) then
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
