-- Hosts (connectors), agents and pairing codes.
--
-- A host is one computer, holding one `yui_ct_…` token of which only the SHA-256 is stored.
-- An agent is bound to at most one host, under a remote_ref (the name the host knows it by).

create table public.yui_connectors (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  name text not null check (char_length(btrim(name)) between 1 and 40),
  kind text not null default 'hermes'
    check (kind in ('hermes', 'openclaw', 'http', 'mcp', 'hosted')),
  token_hash text not null unique,
  created_at timestamptz not null default now(),
  last_seen_at timestamptz,   -- last heartbeat or session
  stopped_at timestamptz,     -- clean goodbye; cleared by the next heartbeat
  serving_at timestamptz,     -- last call that reported which agents it serves
  revoked_at timestamptz,     -- the person removed this computer
  suspended_at timestamptz,   -- the operator's kill switch
  suspended_reason text,
  unique (id, user_id)
);
create index yui_connectors_user_idx on public.yui_connectors (user_id);

alter table public.yui_connectors enable row level security;
revoke all on public.yui_connectors from public, anon, yui_user, yui_connector;
grant select (id, user_id, name, kind, created_at, last_seen_at, stopped_at, serving_at,
              revoked_at, suspended_at)
  on public.yui_connectors to yui_user;
grant update (name) on public.yui_connectors to yui_user;
create policy yui_connectors_owner on public.yui_connectors for all to yui_user
  using (user_id = public.yui_uid()) with check (user_id = public.yui_uid());

create table public.yui_agents (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  name text not null check (char_length(btrim(name)) between 1 and 40),
  handle text not null check (handle ~ '^[a-z0-9][a-z0-9-]{0,31}$'),
  color text not null default 'lavender' check (color in ('lavender', 'mint', 'butter', 'brand')),
  kind text not null default 'hermes'
    check (kind in ('hermes', 'openclaw', 'http', 'mcp', 'hosted')),
  connector_id uuid,
  remote_ref text check (remote_ref is null or remote_ref ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
  is_default boolean not null default false,
  sort integer not null default 0,
  push_muted boolean not null default false,
  bound_at timestamptz,   -- when it was last bound to a host (or profile)
  served_at timestamptz,  -- when a host last reported serving it
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (id, user_id),
  foreign key (connector_id, user_id) references public.yui_connectors (id, user_id)
    on delete set null (connector_id)
);
create index yui_agents_user_idx on public.yui_agents (user_id);
create unique index yui_agents_handle_uq on public.yui_agents (user_id, handle);
create unique index yui_agents_remote_uq on public.yui_agents (connector_id, remote_ref)
  where connector_id is not null;
create unique index yui_agents_one_default_uq on public.yui_agents (user_id) where is_default;

alter table public.yui_agents enable row level security;
revoke all on public.yui_agents from public, anon, yui_user, yui_connector;
grant select, delete on public.yui_agents to yui_user;
grant update (name, color, sort, push_muted) on public.yui_agents to yui_user;
create policy yui_agents_owner on public.yui_agents for all to yui_user
  using (user_id = public.yui_uid()) with check (user_id = public.yui_uid());
-- A host sees the agents it serves, and only the columns it needs to serve them. (The gate
-- function is defined with the messages table, in the next migration.)
grant select (id, user_id, name, handle, remote_ref, connector_id) on public.yui_agents
  to yui_connector;

create function public.yui_touch_updated_at() returns trigger
language plpgsql set search_path = '' as $$
begin
  new.updated_at := now();
  return new;
end
$$;
create trigger yui_agents_touch before update on public.yui_agents
  for each row execute function public.yui_touch_updated_at();

-- (Re)binding an agent to a host starts its presence over: bound now, not yet served.
create function public.yui_agent_bound() returns trigger
language plpgsql set search_path = '' as $$
begin
  if new.connector_id is not null and (tg_op = 'INSERT'
      or new.connector_id is distinct from old.connector_id
      or new.remote_ref is distinct from old.remote_ref) then
    new.bound_at := now();
    new.served_at := null;
  end if;
  return new;
end
$$;
create trigger yui_agent_bound before insert or update of connector_id, remote_ref
  on public.yui_agents for each row execute function public.yui_agent_bound();

-- Pairing codes: six digits, stored as sha256('pair:' || code), ten minutes, single use.
-- An unused code is unique across everyone, because the host looks it up knowing only the code.
create table public.yui_pairings (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  agent_id uuid,
  code_hash text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '10 minutes',
  used_at timestamptz,
  connector_id uuid,
  foreign key (agent_id, user_id) references public.yui_agents (id, user_id) on delete cascade,
  foreign key (connector_id, user_id) references public.yui_connectors (id, user_id)
    on delete set null (connector_id)
);
create index yui_pairings_user_idx on public.yui_pairings (user_id);
create unique index yui_pairings_open_code_uq on public.yui_pairings (code_hash)
  where used_at is null;

alter table public.yui_pairings enable row level security;
revoke all on public.yui_pairings from public, anon, yui_user, yui_connector;
grant select (id, user_id, agent_id, connector_id, created_at, expires_at, used_at)
  on public.yui_pairings to yui_user;
create policy yui_pairings_owner on public.yui_pairings for all to yui_user
  using (user_id = public.yui_uid()) with check (user_id = public.yui_uid());

-- One row per failed code claim, by client address: the pairing throttle counts them.
create table public.yui_pair_attempts (
  id bigint generated always as identity primary key,
  ip text not null,
  created_at timestamptz not null default now()
);
create index yui_pair_attempts_ip_idx on public.yui_pair_attempts (ip, created_at);

alter table public.yui_pair_attempts enable row level security;
revoke all on public.yui_pair_attempts from public, anon, yui_user, yui_connector;
