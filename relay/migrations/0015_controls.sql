-- Agent controls: the person asks the agent's host to list, read or change what the agent is
-- made of (its personality, its memory, its model…) with a control row, and the host answers
-- each request with exactly one control row. Neither is a turn, neither is pushed (yui-push
-- refuses a control row), and the sweep deletes them after 7 days (`yui_retention`). The host
-- says once which sections it serves (the capability report, through yui-connect), and the app
-- reads it with the agent list.

-- Only the agent's owner writes a control row. Restrictive, so a later policy that lets
-- someone else write into a thread (a person an agent is shared with) can never let them in.
create policy yui_messages_control_owner on public.yui_messages as restrictive
  for insert to yui_user
  with check (kind <> 'control' or public.yui_owns_agent(agent_id));

-- A host answers a control only in its owner's own thread of an agent it serves, whatever a
-- later policy lets it write elsewhere.
create policy yui_messages_control_host on public.yui_messages as restrictive
  for insert to yui_connector
  with check (kind <> 'control'
              or (user_id = public.yui_uid() and public.yui_connector_serves(agent_id)));

-- A control row may carry 64 KB of meta (room for a 32 KB personality and its outline); every
-- other kind keeps 16 KB.
alter table public.yui_messages drop constraint yui_messages_meta_check;
alter table public.yui_messages add constraint yui_messages_meta_check check (
  jsonb_typeof(meta) = 'object'
  and pg_column_size(meta) <= case when kind = 'control' then 65536 else 16384 end);

-- An answer names the request it answers (`meta.for`) and never a turn, so nothing that wakes
-- on `meta.turn` (a mention's mirror, a group's hand-off) ever wakes on a settings answer.
-- Checked for every request through the gateway; a direct SQL session (an operator, a test's
-- setup) is exempt, as from every guard.
create function public.yui_control_answer() returns trigger
language plpgsql set search_path = '' as $$
begin
  if public.yui_limited_caller()
     and (coalesce(jsonb_typeof(new.meta -> 'for'), '') <> 'string' or new.meta ? 'turn') then
    raise exception 'control_answer_needs_for' using errcode = '22023',
      hint = 'a control answer names its request in meta.for and carries no meta.turn';
  end if;
  return new;
end
$$;
create trigger yui_messages_control_answer before insert on public.yui_messages
  for each row when (new.kind = 'control' and new.sender = 'agent')
  execute function public.yui_control_answer();

-- The capability report: `{"v": 1, "sections": {"soul": "rw", …}}`, written only by yui-connect
-- (the service role). The person reads it (the table's select grant); hosts have no grant.
alter table public.yui_agents
  add column controls jsonb check (controls is null or jsonb_typeof(controls) = 'object'),
  add column controls_at timestamptz;

-- The app's list gains the report. A view only grows at its end, so the columns before it
-- are exactly the old ones.
create or replace view public.yui_agent_list with (security_invoker = true) as
select
  a.id, a.user_id, a.name, a.handle, a.color, a.kind, a.connector_id, a.remote_ref,
  a.is_default, a.sort, a.created_at, a.updated_at,
  c.name as connector_name,
  c.last_seen_at,
  case
    when a.connector_id is null then 'pending'
    when c.revoked_at is null and c.stopped_at is null
         and c.last_seen_at > now() - interval '2 minutes' then 'connected'
    else 'offline'
  end as status,
  a.push_muted,
  public.yui_presence(a.connector_id, c.revoked_at, c.stopped_at, c.last_seen_at,
                      c.serving_at, a.bound_at, a.served_at) as presence,
  a.controls
from public.yui_agents a
left join public.yui_connectors c on c.id = a.connector_id;
