-- Media (YUI-21): the private bucket yui-media, its objects, and who may read, upload, delete.
--
-- The bytes live on the relay's disk (the gateway's `media` folder, one file per object id);
-- these rows are the only thing that says who may touch them. Every Storage call runs as the
-- caller, so the policies below, not the gateway, decide. A path is
-- `<user>/<agent>/<from>/<name>`, `from` being `user` (the person's photo) or `agent` (what an
-- agent sends). Nobody updates an object: a new picture is a new path.

create schema storage;
revoke all on schema storage from public;
grant usage on schema storage to yui_user, yui_connector, service_role;

create table storage.buckets (
  id text primary key,
  name text not null unique,
  public boolean not null default false,
  file_size_limit bigint check (file_size_limit > 0),
  allowed_mime_types text[],
  created_at timestamptz not null default now()
);
alter table storage.buckets enable row level security;
revoke all on storage.buckets from public, anon, yui_user, yui_connector;
grant select on storage.buckets to yui_user, yui_connector, service_role;
create policy yui_media_bucket on storage.buckets for select to yui_user, yui_connector
  using (id = 'yui-media');

insert into storage.buckets (id, name, public, file_size_limit, allowed_mime_types) values
  ('yui-media', 'yui-media', false, 52428800,
   array['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/heic',
         'video/mp4', 'video/quicktime', 'audio/mp4', 'audio/midi']);

-- The uploader is taken from the request's claims, never from what the client sent.
create table storage.objects (
  id uuid primary key default gen_random_uuid(),
  bucket_id text not null references storage.buckets (id),
  name text collate "C" not null check (char_length(name) between 1 and 1024),
  owner_role text default public.yui_caller(),
  owner_id uuid default public.yui_uid(),
  size bigint not null check (size >= 0),
  mime_type text not null,
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  created_at timestamptz not null default now(),
  unique (bucket_id, name)
);
create index objects_created_idx on storage.objects (bucket_id, created_at);

alter table storage.objects enable row level security;
revoke all on storage.objects from public, anon, yui_user, yui_connector;
grant select, delete on storage.objects to yui_user;
grant select on storage.objects to yui_connector;
grant insert (id, bucket_id, name, size, mime_type, sha256) on storage.objects
  to yui_user, yui_connector;
grant select, insert, delete on storage.objects to service_role;

-- The bucket's own limits hold for every writer, the service role included (413 and 415).
create function storage.objects_fit_bucket() returns trigger
language plpgsql security definer set search_path = '' as $$
declare
  b storage.buckets;
begin
  select * into b from storage.buckets where id = new.bucket_id;
  if b.file_size_limit is not null and new.size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413';
  end if;
  if b.allowed_mime_types is not null and not (new.mime_type = any (b.allowed_mime_types)) then
    raise exception 'mime type % is not supported', new.mime_type using errcode = 'PT415';
  end if;
  return new;
end
$$;
revoke all on function storage.objects_fit_bucket() from public;
create trigger objects_fit_bucket before insert on storage.objects
  for each row execute function storage.objects_fit_bucket();

insert into public.yui_limits (name, value, note) values
  ('media_uploads_per_day', 1000, 'media uploads per account per day, each side (person, agents)')
on conflict (name) do nothing;

-- The agent a media path belongs to, or null for anything that isn't a Yui path (`..`, `.`,
-- a missing segment, an odd character), which every policy then refuses.
create function public.yui_media_agent(name text) returns uuid
language sql immutable set search_path = '' as $$
  select case
    when name ~ '^[0-9a-f-]{36}/[0-9a-f-]{36}/(agent|user)/[A-Za-z0-9._-]{1,80}$'
         and split_part(name, '/', 2)
             ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
         and split_part(name, '/', 4) not in ('.', '..')
    then split_part(name, '/', 2)::uuid
  end
$$;
grant execute on function public.yui_media_agent(text) to yui_user, yui_connector, service_role;

-- Under the daily quota: fewer than `media_uploads_per_day` uploads by the caller's account in
-- the last day on this path's side. Counts every host's uploads, not only what one host sees.
create function public.yui_media_quota_ok(name text) returns boolean
language sql stable security definer set search_path = '' as $$
  select public.yui_media_agent(yui_media_quota_ok.name) is not null and (
    select count(*) from storage.objects o
    where o.bucket_id = 'yui-media'
      and o.name like public.yui_uid()::text || '/%'
      and split_part(o.name, '/', 3) = split_part(yui_media_quota_ok.name, '/', 3)
      and o.created_at > now() - interval '1 day'
  ) < coalesce(public.yui_limit('media_uploads_per_day'), 0)
$$;
revoke all on function public.yui_media_quota_ok(text) from public;
grant execute on function public.yui_media_quota_ok(text) to yui_user, yui_connector;

-- The person: reads and deletes everything under their own folder; uploads only their own
-- photos, into their own agents' threads, while not suspended and under the quota.
create policy yui_media_user_read on storage.objects for select to yui_user
  using (bucket_id = 'yui-media' and split_part(name, '/', 1) = public.yui_uid()::text);
create policy yui_media_user_write on storage.objects for insert to yui_user
  with check (bucket_id = 'yui-media'
              and split_part(name, '/', 1) = public.yui_uid()::text
              and split_part(name, '/', 3) = 'user'
              and public.yui_owns_agent(public.yui_media_agent(name))
              and exists (select 1 from public.yui_users u
                          where u.id = public.yui_uid() and u.suspended_at is null)
              and public.yui_media_quota_ok(name));
create policy yui_media_user_delete on storage.objects for delete to yui_user
  using (bucket_id = 'yui-media' and split_part(name, '/', 1) = public.yui_uid()::text);

-- The host: reads media only in the threads it serves (the live gate, so a revoked host stops
-- at once), uploads only as the agent, and deletes nothing (no grant).
create policy yui_media_connector_read on storage.objects for select to yui_connector
  using (bucket_id = 'yui-media'
         and split_part(name, '/', 1) = public.yui_uid()::text
         and public.yui_connector_serves(public.yui_media_agent(name)));
create policy yui_media_connector_write on storage.objects for insert to yui_connector
  with check (bucket_id = 'yui-media'
              and split_part(name, '/', 1) = public.yui_uid()::text
              and split_part(name, '/', 3) = 'agent'
              and public.yui_connector_serves(public.yui_media_agent(name))
              and public.yui_media_quota_ok(name));

-- Every object under a person's folder (account deletion removes them through Storage).
create function public.yui_media_names(uid uuid) returns setof text
language sql stable set search_path = '' as $$
  select o.name::text from storage.objects o
  where o.bucket_id = 'yui-media' and o.name like uid::text || '/%'
  order by o.name
$$;
revoke all on function public.yui_media_names(uuid) from public;
grant execute on function public.yui_media_names(uuid) to service_role;

-- What the daily sweep removes: media whose person or agent is gone (or whose path isn't ours)
-- at once, and uploads older than `grace` that no message of their person mentions (a send that
-- failed, a message the person deleted). Storage owns the bytes, so the sweep deletes through it.
create function public.yui_media_orphans(grace interval default '1 day') returns setof text
language sql stable set search_path = '' as $$
  select o.name::text
  from storage.objects o
  left join public.yui_agents a
    on a.id = public.yui_media_agent(o.name) and a.user_id::text = split_part(o.name, '/', 1)
  where o.bucket_id = 'yui-media'
    and (a.id is null
         or (o.created_at < now() - grace
             and not exists (select 1 from public.yui_messages m
                             where m.user_id = a.user_id
                               and (strpos(m.body, o.name) > 0
                                    or strpos(m.meta::text, o.name) > 0))))
  order by o.name
$$;
revoke all on function public.yui_media_orphans(interval) from public;
grant execute on function public.yui_media_orphans(interval) to service_role;
