-- One-time sign-in links for the web app (`yui app web`): a person already signed in on this
-- machine opens the page in a browser without typing a password.
--
-- The command makes a random secret and writes only its SHA-256 here, as the person (their app
-- token): the policy lets a person write links for themselves and nobody read any. The page
-- trades the secret once, within ten minutes, for a session (`/functions/v1/yui-web`, which
-- runs as the service role, as every sign-in does); the row is used up by that trade.

create table public.yui_signin_links (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null default public.yui_uid()
    references public.yui_users (id) on delete cascade,
  secret_hash text not null unique check (secret_hash ~ '^[0-9a-f]{64}$'),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '10 minutes',
  used_at timestamptz,
  check (expires_at <= created_at + interval '10 minutes')
);
create index yui_signin_links_user_idx on public.yui_signin_links (user_id, created_at);

alter table public.yui_signin_links enable row level security;
revoke all on public.yui_signin_links from public, anon, yui_user, yui_connector;
grant insert (secret_hash) on public.yui_signin_links to yui_user;
grant select, update, delete on public.yui_signin_links to service_role;
create policy yui_signin_links_own on public.yui_signin_links for insert to yui_user
  with check (user_id = public.yui_uid());

-- A person can't fill the table: links past this many in an hour are refused.
insert into public.yui_limits (name, value, note) values
  ('signin_links_per_hour', 20, 'one-time web sign-in links a person can make in an hour')
on conflict (name) do nothing;

create function public.yui_signin_links_cap() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  cap numeric := coalesce(
    (select value from public.yui_limits where name = 'signin_links_per_hour'), 20);
begin
  if (select count(*) from public.yui_signin_links
      where user_id = new.user_id and created_at > now() - interval '1 hour') >= cap then
    raise exception 'too_many_links' using errcode = 'PT429';
  end if;
  return new;
end
$$;
revoke all on function public.yui_signin_links_cap() from public;
create trigger yui_signin_links_cap before insert on public.yui_signin_links
  for each row execute function public.yui_signin_links_cap();
