-- The web app's build counts among a person's apps (issue 18).
--
-- A bridge gates a reply for the oldest app build among the phones a person used in the last
-- 14 days (yui-connect's `app_build`); a person with only the web app had no phone, so every
-- gated preset reached the page as words. The page says which build it draws when it opens
-- (`/functions/v1/yui-web`, action `seen`, with the person's own token): one row per person,
-- the build their browser said last, counted like a phone's for 14 days. A phone older than the
-- page still sets the floor: what every app of the person's can draw.

create table public.yui_web_builds (
  user_id uuid primary key references public.yui_users (id) on delete cascade,
  app_build integer not null check (app_build between 1 and 1000000),
  app_build_at timestamptz not null default now()
);

alter table public.yui_web_builds enable row level security;
revoke all on public.yui_web_builds from public, anon, yui_user, yui_connector;
grant select, insert, update, delete on public.yui_web_builds to service_role;
