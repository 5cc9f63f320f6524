-- Honest presence, straight from the host's heartbeat and never guessed, and the app's list.
--
-- One rule, in one function, with a two-minute window. A host that reports which agents it
-- serves (`serving`) gets presence per agent; one that never does keeps per-computer presence.

create function public.yui_presence(
  connector uuid, revoked_at timestamptz, stopped_at timestamptz, last_seen_at timestamptz,
  serving_at timestamptz, bound_at timestamptz, served_at timestamptz
) returns text
language sql stable set search_path = '' as $$
  select case
    when connector is null then 'pending'
    when revoked_at is not null then 'offline'
    -- the computer reports per agent, but nothing has served this one since it was bound
    when serving_at is not null and bound_at is not null and served_at is null
      then 'not_listening'
    when stopped_at is not null then 'offline'
    when last_seen_at is null or last_seen_at <= now() - interval '2 minutes' then 'asleep'
    -- the computer is up, but this agent's bridge stopped reporting it
    when serving_at > now() - interval '2 minutes' and served_at is not null
         and served_at <= now() - interval '2 minutes' then 'offline'
    else 'online'
  end
$$;
grant execute on function public.yui_presence(uuid, timestamptz, timestamptz, timestamptz,
  timestamptz, timestamptz, timestamptz) to yui_user, service_role;

-- A heartbeat, session or pairing that names the agents it serves.
create function public.yui_serving(connector uuid, refs text[]) returns integer
language plpgsql volatile security definer set search_path = '' as $$
declare
  n integer;
begin
  update public.yui_connectors set serving_at = now() where id = connector;
  update public.yui_agents set served_at = now()
    where connector_id = connector and remote_ref = any (refs);
  get diagnostics n = row_count;
  return n;
end
$$;
revoke all on function public.yui_serving(uuid, text[]) from public;
grant execute on function public.yui_serving(uuid, text[]) to service_role;

-- A clean goodbye from the bridge serving `refs`: those agents read offline at once, and the
-- computer reads offline only if no other bridge on it still serves an agent. True when this
-- was the last one.
create function public.yui_serving_bye(connector uuid, refs text[]) returns boolean
language plpgsql volatile security definer set search_path = '' as $$
declare
  last_one boolean;
begin
  update public.yui_agents set served_at = now() - interval '2 minutes'
    where connector_id = connector and remote_ref = any (refs);
  last_one := not exists (
    select 1 from public.yui_agents
    where connector_id = connector and not (remote_ref = any (refs))
      and served_at > now() - interval '2 minutes');
  update public.yui_connectors
    set serving_at = now(), last_seen_at = now(),
        stopped_at = case when last_one then now() else stopped_at end
    where id = connector;
  return last_one;
end
$$;
revoke all on function public.yui_serving_bye(uuid, text[]) from public;
grant execute on function public.yui_serving_bye(uuid, text[]) to service_role;

-- The app's agent list. Runs as the reader, so the tables' own policies decide what it shows.
create view public.yui_agent_list with (security_invoker = true) as
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
                      c.serving_at, a.bound_at, a.served_at) as presence
from public.yui_agents a
left join public.yui_connectors c on c.id = a.connector_id;

revoke all on public.yui_agent_list from public, anon, yui_user, yui_connector;
grant select on public.yui_agent_list to yui_user, service_role;
