-- Passwords, e-mail addresses and anonymous people, for `/auth/v1` (the official clients'
-- `auth`: signUp, signInWithPassword, signInAnonymously, refreshSession, getUser, signOut).
--
-- A person signs in with an e-mail address and a password besides the app's refresh token. The
-- address is yui_users.email (there since 0002, unused until now): kept trimmed and in lower
-- case, so unique whatever case it was typed in. The password's scrypt hash lives apart, in a
-- table only the service role reads, because a person reads their own yui_users row over REST.
-- No new function: the gateway does all of it as the service role.

update public.yui_users set email = nullif(lower(btrim(email)), '') where email is not null;
alter table public.yui_users
  add constraint yui_users_email_shape check (
    email is null
    or (email = lower(btrim(email)) and char_length(email) <= 254
        and email ~ '^[^@[:space:]]+@[^@[:space:]]+$')
  ),
  -- Made by signInAnonymously (only where the relay allows it); false once it has an address
  -- and a password.
  add column is_anonymous boolean not null default false;
create unique index yui_users_email_key on public.yui_users (email);

create table public.yui_passwords (
  user_id uuid primary key references public.yui_users (id) on delete cascade,
  hash text not null,  -- scrypt$<n>$<r>$<p>$<salt>$<key>, base64; never the password
  updated_at timestamptz not null default now()
);
alter table public.yui_passwords enable row level security;
revoke all on public.yui_passwords from public, anon, yui_user, yui_connector;
grant select, insert, update, delete on public.yui_passwords to service_role;

-- A refresh token's chain: the sign-in it descends from (GoTrue's "session"). A refresh keeps
-- it, and the app token carries it as `session_id`, so signing out can end this sign-in alone
-- (`local`), every other one (`others`) or all of them (`global`).
alter table public.yui_sessions add column chain_id uuid not null default gen_random_uuid();
create index yui_sessions_chain_idx on public.yui_sessions (chain_id);

-- Password sign-ins (right or wrong: a refused one takes nothing) and sign-ups are counted per
-- address (behind `--trusted-proxy`, the client's) and, for sign-ins, per e-mail address too,
-- whether or not anyone has it.
insert into public.yui_limits (name, value, note) values
  ('signin_address_burst', 30, 'password sign-ins one address can try at once'),
  ('signin_address_per_min', 6, 'password sign-ins per address, sustained (30 in 5 minutes)'),
  ('signin_account_burst', 10, 'password sign-ins one e-mail address can take at once'),
  ('signin_account_per_min', 0.2, 'password sign-ins per e-mail address, sustained (12 an hour)'),
  ('signup_address_burst', 30, 'sign-ups (e-mail or anonymous) one address can make at once'),
  ('signup_address_per_min', 0.5, 'sign-ups per address, sustained (30 an hour)')
on conflict (name) do nothing;
