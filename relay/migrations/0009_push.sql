-- Push (YUI-8): the person's phones, what yui-push sent them, and its limits.
--
-- Every write goes through yui-push as the service role, because a phone's token must be able
-- to move from one account to another. The person may read their own rows; hosts get no grant
-- at all, so a host never sees a device token.

create table public.yui_devices (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  name text check (name is null or char_length(name) between 1 and 60),
  apns_token text not null,
  environment text not null default 'production'
    check (environment in ('production', 'sandbox')),
  app_build integer check (app_build is null or app_build > 0),  -- the app's CFBundleVersion
  app_build_at timestamptz,
  active_at timestamptz,     -- the app is open (presence); stale after 90 seconds
  active_agent_id uuid,      -- on this agent's thread
  last_push_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint yui_devices_token_shape check (apns_token ~ '^[0-9a-f]{64,200}$'),
  -- the thread a phone is open on is one of its person's own agents
  foreign key (active_agent_id, user_id) references public.yui_agents (id, user_id)
    on delete set null (active_agent_id)
);
create unique index yui_devices_token_key on public.yui_devices (apns_token);
create index yui_devices_user_idx on public.yui_devices (user_id);

alter table public.yui_devices enable row level security;
revoke all on public.yui_devices from public, anon, yui_user, yui_connector;
grant select on public.yui_devices to yui_user;
create policy yui_devices_owner on public.yui_devices for select to yui_user
  using (user_id = public.yui_uid());

create trigger yui_devices_touch before update on public.yui_devices
  for each row execute function public.yui_touch_updated_at();

insert into public.yui_limits (name, value, note) values
  ('push_burst', 60, 'push requests one host can make at once'),
  ('push_per_min', 10, 'push requests per host, sustained'),
  ('devices_per_user', 10, 'phones one account can register for push')
on conflict (name) do nothing;

-- A new phone counts against its person's cap, and a suspended person adds none. Registering a
-- phone again is free; a phone that moves here from another account is a new one for this one.
-- A direct SQL session is exempt, as with every guard.
create function public.yui_devices_guard() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if not public.yui_limited_caller() then
    return new;
  end if;
  if exists (select 1 from public.yui_devices d
             where d.apns_token = new.apns_token and d.user_id = new.user_id) then
    return new;
  end if;
  if exists (select 1 from public.yui_users u where u.id = new.user_id
             and u.suspended_at is not null) then
    raise exception 'account_suspended' using errcode = 'PT403';
  end if;
  if (select count(*) from public.yui_devices d where d.user_id = new.user_id)
     >= coalesce(public.yui_limit('devices_per_user'), 'infinity') then
    raise exception 'limit_reached' using errcode = 'PT403', detail = 'yui_devices';
  end if;
  return new;
end
$$;
create trigger yui_devices_guard before insert on public.yui_devices
  for each row execute function public.yui_devices_guard();

-- One row per push yui-push made: to Apple ('sent' or 'failed', with Apple's reason) or, on a
-- local relay without Apple, into this table alone ('sunk'). `yui app notifications` reads it.
-- Deleting the message or the agent deletes its pushes, so no preview outlives its message.
create table public.yui_notifications (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references public.yui_users (id) on delete cascade,
  agent_id uuid not null,
  message_id uuid not null references public.yui_messages (id) on delete cascade,
  device_id uuid references public.yui_devices (id) on delete set null,
  title text not null,
  body text not null,
  payload jsonb not null check (jsonb_typeof(payload) = 'object'),
  environment text not null check (environment in ('production', 'sandbox')),
  status text not null check (status in ('sunk', 'sent', 'failed')),
  reason text,
  created_at timestamptz not null default now(),
  foreign key (agent_id, user_id) references public.yui_agents (id, user_id) on delete cascade
);
create index yui_notifications_user_idx on public.yui_notifications (user_id, created_at);
create index yui_notifications_message_idx on public.yui_notifications (message_id);

alter table public.yui_notifications enable row level security;
revoke all on public.yui_notifications from public, anon, yui_user, yui_connector;
grant select on public.yui_notifications to yui_user;
create policy yui_notifications_owner on public.yui_notifications for select to yui_user
  using (user_id = public.yui_uid());
