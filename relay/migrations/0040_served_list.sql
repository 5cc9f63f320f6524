-- The agents a host serves, kept with the host (issue 21).
--
-- yui_served_agents (0038) runs once per statement for each policy that names it: 11 times in a
-- turn (an UPDATE of one row holds four: its select, update and check policies, and the select
-- policy again for what it returns). Each call gathered the host's agents row by row from
-- yui_agents, 0.15–0.25 ms for a host of 100 agents, ~2.5 ms of a turn. Here the list is kept
-- in a row of its own, one per host, as agents are paired, moved and removed; a call reads that
-- row (a probe of its primary key) after the same checks of the host and its person as before.
--
-- The list is edited, never rebuilt, by the trigger below: an append or a removal on the row's
-- newest version, so two pairings on one host at once both land (the second waits for the
-- first's row lock, then edits what the first left). An agent's host belongs to the agent's
-- person (the (connector_id, user_id) foreign key of 0003), so the list needs no person check.

create table public.yui_served (
  connector_id uuid primary key references public.yui_connectors (id) on delete cascade,
  agent_ids uuid[] not null default '{}'
);
alter table public.yui_served enable row level security;
revoke all on public.yui_served from public, anon, yui_user, yui_connector, service_role;

insert into public.yui_served (connector_id, agent_ids)
select a.connector_id, array_agg(a.id order by a.id)
from public.yui_agents a
where a.connector_id is not null
group by a.connector_id;

create function public.yui_served_keep() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if tg_op in ('UPDATE', 'DELETE') and old.connector_id is not null
     and (tg_op = 'DELETE' or old.connector_id is distinct from new.connector_id
          or old.id <> new.id) then
    update public.yui_served s set agent_ids = array_remove(s.agent_ids, old.id)
      where s.connector_id = old.connector_id;
  end if;
  if tg_op in ('INSERT', 'UPDATE') and new.connector_id is not null
     and (tg_op = 'INSERT' or old.connector_id is distinct from new.connector_id
          or old.id <> new.id) then
    insert into public.yui_served as s (connector_id, agent_ids)
      values (new.connector_id, array[new.id])
      on conflict (connector_id) do update
      set agent_ids = array_append(array_remove(s.agent_ids, new.id), new.id);
  end if;
  return null;
end
$$;
create trigger yui_served_keep after insert or delete or update of id, connector_id
  on public.yui_agents for each row execute function public.yui_served_keep();

-- 0038's function, the list read from the host's row; the checks of the host are the same.
create or replace function public.yui_served_agents() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
declare
  uid uuid := public.yui_uid();
  cid uuid := public.yui_cid();
begin
  return coalesce((
    select s.agent_ids
    from public.yui_connectors c
    join public.yui_users u on u.id = c.user_id
    join public.yui_served s on s.connector_id = c.id
    where c.id = cid and c.user_id = uid
      and c.revoked_at is null and c.suspended_at is null and u.suspended_at is null), '{}');
end
$$;
