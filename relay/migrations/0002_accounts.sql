-- People and their app sessions.
--
-- Every table that belongs to a person references yui_users on delete cascade, so deleting an
-- account leaves no row behind.

create table public.yui_users (
  id uuid primary key default gen_random_uuid(),
  name text not null check (char_length(btrim(name)) between 1 and 60),
  email text,
  created_at timestamptz not null default now(),
  last_sign_in_at timestamptz not null default now(),
  suspended_at timestamptz,
  suspended_reason text
);

alter table public.yui_users enable row level security;
revoke all on public.yui_users from public, anon, yui_user, yui_connector;
grant select on public.yui_users to yui_user;
create policy yui_users_self on public.yui_users for select to yui_user
  using (id = public.yui_uid());

-- Refresh tokens for the person's app (only their SHA-256 is kept). Server only.
create table public.yui_sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  refresh_hash text not null unique,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);
create index yui_sessions_user_idx on public.yui_sessions (user_id);

alter table public.yui_sessions enable row level security;
revoke all on public.yui_sessions from public, anon, yui_user, yui_connector;
