-- Roles and the request's identity.
--
-- The gateway logs in as `authenticator` and, for each request, switches to the role its token
-- names (`anon`, `yui_user`, `yui_connector` or `service_role`) and sets `request.jwt.claims`,
-- as PostgREST does. Policies read the claims through the small functions below. On a hosted
-- Postgres that already has some of these roles, they are left as they are.

do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'yui_user') then
    create role yui_user nologin noinherit;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'yui_connector') then
    create role yui_connector nologin noinherit;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if not exists (select 1 from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
end
$$;

grant anon, yui_user, yui_connector, service_role to authenticator;

revoke create on schema public from public;
grant usage on schema public to anon, yui_user, yui_connector, service_role;

-- Nothing new in this schema is executable or readable by default: every grant is explicit.
alter default privileges in schema public revoke execute on functions from public;
alter default privileges in schema public grant all on tables to service_role;
alter default privileges in schema public grant all on sequences to service_role;

-- The request's claims as JSON; empty for a direct SQL session (an operator, a migration).
create or replace function public.yui_claims() returns jsonb
language sql stable set search_path = '' as $$
  select coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb
$$;

create or replace function public.yui_claim_uuid(claim text) returns uuid
language sql stable set search_path = '' as $$
  select case
    when public.yui_claims() ->> claim
         ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
    then (public.yui_claims() ->> claim)::uuid
  end
$$;

-- The person the request acts for (`sub`), for people and for hosts alike.
create or replace function public.yui_uid() returns uuid
language sql stable set search_path = '' as $$ select public.yui_claim_uuid('sub') $$;

-- The host (connector) a host's token was minted for (`cid`).
create or replace function public.yui_cid() returns uuid
language sql stable set search_path = '' as $$ select public.yui_claim_uuid('cid') $$;

-- The role the token names, or null for a direct SQL session (guards let those through).
create or replace function public.yui_caller() returns text
language sql stable set search_path = '' as $$
  select nullif(public.yui_claims() ->> 'role', '')
$$;

grant execute on function public.yui_claims(), public.yui_claim_uuid(text), public.yui_uid(),
  public.yui_caller() to yui_user, yui_connector, service_role;
grant execute on function public.yui_cid() to yui_connector, service_role;
