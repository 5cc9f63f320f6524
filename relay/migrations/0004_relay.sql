-- The relay: one row per message, per (person, agent) thread, and the one gate hosts pass.
--
-- The app writes the person's rows (sender 'user'); a host writes its agent's rows (sender
-- 'agent') and acks the person's rows with delivered_at, then handled_at. Clients choose row
-- ids, so a resend hits the primary key (409) instead of writing twice.

-- The single gate: the agent belongs to the token's person, is bound to the token's host, the
-- host is neither revoked nor suspended, and the person is not suspended. Checked live on every
-- request, so removing a host cuts it off at once, even with an unexpired token.
create function public.yui_connector_serves(agent uuid) returns boolean
language sql stable security definer set search_path = '' as $$
  select exists (
    select 1
    from public.yui_agents a
    join public.yui_connectors c on c.id = a.connector_id and c.user_id = a.user_id
    join public.yui_users u on u.id = a.user_id
    where a.id = agent
      and a.user_id = public.yui_uid()
      and c.id = public.yui_cid()
      and c.revoked_at is null
      and c.suspended_at is null
      and u.suspended_at is null
  )
$$;
revoke all on function public.yui_connector_serves(uuid) from public;
grant execute on function public.yui_connector_serves(uuid) to yui_connector, service_role;

create policy yui_agents_connector_read on public.yui_agents for select to yui_connector
  using (user_id = public.yui_uid() and public.yui_connector_serves(id));

-- The person owns this agent (runs as the caller, so the agents table's own policy applies).
create function public.yui_owns_agent(agent uuid) returns boolean
language sql stable set search_path = '' as $$
  select exists (select 1 from public.yui_agents a
                 where a.id = agent and a.user_id = public.yui_uid())
$$;
grant execute on function public.yui_owns_agent(uuid) to yui_user, service_role;

create table public.yui_messages (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  agent_id uuid references public.yui_agents (id) on delete cascade,
  sender text not null check (sender in ('user', 'agent')),
  body text not null check (char_length(body) between 1 and 32000),
  kind text not null default 'text' check (kind in ('text', 'event', 'control')),
  meta jsonb not null default '{}'
    check (jsonb_typeof(meta) = 'object' and pg_column_size(meta) <= 16384),
  created_at timestamptz not null default clock_timestamp(),
  delivered_at timestamptz,  -- the host picked it up and handed it to the agent
  handled_at timestamptz     -- the agent's turn on it finished
);
create index yui_messages_user_idx on public.yui_messages (user_id, created_at);
create index yui_messages_thread_idx on public.yui_messages (agent_id, created_at);
-- The hosts' work queue: the person's rows not yet handled.
create index yui_messages_unhandled_idx on public.yui_messages (agent_id, created_at)
  where sender = 'user' and handled_at is null;

alter table public.yui_messages enable row level security;
revoke all on public.yui_messages from public, anon, yui_user, yui_connector;
grant select, insert, delete on public.yui_messages to yui_user;
grant select on public.yui_messages to yui_connector;
grant insert (id, user_id, agent_id, sender, body, kind, meta) on public.yui_messages
  to yui_connector;
grant update (delivered_at, handled_at) on public.yui_messages to yui_connector;

-- The person: their own threads only, writing only as themselves, never editing.
create policy yui_messages_user_read on public.yui_messages for select to yui_user
  using (user_id = public.yui_uid() and (agent_id is null or public.yui_owns_agent(agent_id)));
create policy yui_messages_user_write on public.yui_messages for insert to yui_user
  with check (user_id = public.yui_uid() and sender = 'user' and agent_id is not null
              and kind in ('text', 'event') and public.yui_owns_agent(agent_id));
create policy yui_messages_user_delete on public.yui_messages for delete to yui_user
  using (user_id = public.yui_uid() and (agent_id is null or public.yui_owns_agent(agent_id)));

-- The host: only threads of agents bound to it; writes only its agent's text rows; acks only
-- the person's rows (the column grant limits an ack to delivered_at and handled_at).
create policy yui_messages_connector_read on public.yui_messages for select to yui_connector
  using (user_id = public.yui_uid() and public.yui_connector_serves(agent_id));
create policy yui_messages_connector_write on public.yui_messages for insert to yui_connector
  with check (sender = 'agent' and kind = 'text' and user_id = public.yui_uid()
              and public.yui_connector_serves(agent_id));
create policy yui_messages_connector_ack on public.yui_messages for update to yui_connector
  using (sender = 'user' and user_id = public.yui_uid() and public.yui_connector_serves(agent_id))
  with check (sender = 'user' and user_id = public.yui_uid()
              and public.yui_connector_serves(agent_id));

-- A row's agent must belong to the row's person, whoever writes it.
create function public.yui_messages_owner() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if new.agent_id is not null and not exists (
      select 1 from public.yui_agents a where a.id = new.agent_id and a.user_id = new.user_id) then
    raise exception 'agent_not_yours' using errcode = '23503';
  end if;
  return new;
end
$$;
create trigger yui_messages_owner before insert or update of agent_id, user_id
  on public.yui_messages for each row execute function public.yui_messages_owner();

-- Every insert wakes whoever listens (the live feed): ids only, each listener reads the row
-- under its own claims, so a notification never leaks a body.
create function public.yui_messages_notify() returns trigger
language plpgsql set search_path = '' as $$
begin
  perform pg_notify('yui_messages', json_build_object(
    'id', new.id, 'user_id', new.user_id, 'agent_id', new.agent_id,
    'sender', new.sender, 'kind', new.kind)::text);
  return null;
end
$$;
create trigger yui_messages_notify after insert on public.yui_messages
  for each row execute function public.yui_messages_notify();

-- The channel guide agents are given; served only through yui-connect (no grants).
create table public.yui_channel_guides (
  version text primary key,
  body text not null,
  created_at timestamptz not null default now()
);
alter table public.yui_channel_guides enable row level security;
revoke all on public.yui_channel_guides from public, anon, yui_user, yui_connector;
