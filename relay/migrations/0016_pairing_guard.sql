-- Pairing codes can't be walked (issue 14).
--
-- A code is six digits, a million values, and a claim names only the code. So a wrong guess is
-- not aimed at any one account: it is a guess at every code live at that moment, and it counts
-- once against each of them and once against its account for each (an account with two live
-- codes loses two). Three budgets, all rows of yui_limits:
--   pair_attempts_per_10min    wrong codes one address may try in ten minutes (0005); past it
--                              the address's claims are refused unchecked, right or wrong;
--   pair_guesses_per_code      wrong guesses, from anywhere, a code takes before it dies: it
--                              expires at once (the app sees it expired), its claim answers
--                              as a wrong code does, and the person makes a new one;
--   pair_guesses_per_user_day  wrong guesses an account's codes may take in 24 hours: then its
--                              live codes die and it can't make new ones (429 pairing_paused)
--                              until the oldest of them are a day old.
-- Whatever the number of addresses, a guess that could claim one of an account's codes costs
-- that account one of its daily budget, so with the defaults (10, 20, 50) the best an attacker
-- can do is 20 chances in a million per code (1 in 50,000) and 50 per account per day (1 in
-- 20,000). One address makes at most 10 wrong guesses in a code's ten minutes, fewer than the
-- 20 that kill it, so nobody who shares an address with a careless or hostile caller (every
-- local client does, without a trusted proxy) loses a code to it: they wait out its window.
--
-- The check and the count are one step, `yui_pair_claim`, under a lock per address: before,
-- the count, the claim and the record of a failure were three transactions, and 40 concurrent
-- wrong guesses from one address had 20 of them checked instead of 10.

insert into public.yui_limits (name, value, note) values
  ('pair_guesses_per_code', 20,
   'wrong pairing codes, from anywhere, a live code takes before it dies'),
  ('pair_guesses_per_user_day', 50,
   'wrong pairing codes an account''s live codes may take in 24 hours; then pairing pauses')
on conflict (name) do nothing;

alter table public.yui_pairings add column wrong_guesses integer not null default 0;

-- One row per wrong guess an account's live code took: the account's budget counts them. A
-- separate table, because a code's row goes when the person replaces it.
create table public.yui_pair_strikes (
  id bigint generated always as identity primary key,
  user_id uuid not null references public.yui_users (id) on delete cascade,
  created_at timestamptz not null default now()
);
create index yui_pair_strikes_user_idx on public.yui_pair_strikes (user_id, created_at);

alter table public.yui_pair_strikes enable row level security;
revoke all on public.yui_pair_strikes from public, anon, yui_user, yui_connector;

-- Claim the code whose hash is `claimed_hash` for a caller at `caller_ip`: the claimed row,
-- no row for a wrong (or dead, or expired) code, PT429 too_many_attempts for a throttled
-- address. A wrong guess is recorded before this returns, so the caller commits it.
create function public.yui_pair_claim(claimed_hash text, caller_ip text)
returns table (pairing_id uuid, owner_id uuid, claimed_agent_id uuid)
language plpgsql volatile security definer set search_path = '' as $$
declare
  per_code integer := coalesce(public.yui_limit('pair_guesses_per_code'), 0);
  per_day integer := coalesce(public.yui_limit('pair_guesses_per_user_day'), 0);
  hit_ids uuid[];
  struck uuid[];
begin
  perform pg_advisory_xact_lock(hashtextextended('yui_pair_claim:' || caller_ip, 0));
  if (select count(*) from public.yui_pair_attempts a
      where a.ip = caller_ip and a.created_at > now() - interval '10 minutes')
     >= coalesce(public.yui_limit('pair_attempts_per_10min'), 0) then
    raise exception 'too_many_attempts' using errcode = 'PT429';
  end if;

  update public.yui_pairings p set used_at = now()
  where p.code_hash = claimed_hash and p.used_at is null and p.expires_at > now()
    and p.agent_id is not null and p.wrong_guesses < per_code
    and (select count(*) from public.yui_pair_strikes s
         where s.user_id = p.user_id and s.created_at > now() - interval '1 day') < per_day
  returning p.id, p.user_id, p.agent_id into pairing_id, owner_id, claimed_agent_id;
  if found then
    return next;
    return;
  end if;

  insert into public.yui_pair_attempts (ip) values (caller_ip);
  -- Every live code takes the guess, locked in one order so concurrent guesses can't deadlock.
  with live as (
    select p.id from public.yui_pairings p
    where p.used_at is null and p.expires_at > now() and p.agent_id is not null
      and p.wrong_guesses < per_code
    order by p.id
    for update
  ), hit as (
    update public.yui_pairings p set wrong_guesses = p.wrong_guesses + 1,
      expires_at = case when p.wrong_guesses + 1 >= per_code then now() else p.expires_at end
    from live where p.id = live.id
    returning p.id, p.user_id
  ), strikes as (
    insert into public.yui_pair_strikes (user_id) select hit.user_id from hit
  )
  select array_agg(hit.id), array_agg(distinct hit.user_id) into hit_ids, struck from hit;
  delete from public.yui_pair_strikes s
  where s.user_id = any(struck) and s.created_at <= now() - interval '1 day';
  -- An account at its budget: its live codes die now, for good (not only while it is past
  -- it). Only rows this guess holds, so it waits on no other; a code made meanwhile is refused
  -- by the claim's own check, and dies with the next wrong guess.
  update public.yui_pairings p set wrong_guesses = per_code, expires_at = now()
  where p.id = any(hit_ids) and p.wrong_guesses < per_code
    and (select count(*) from public.yui_pair_strikes s
         where s.user_id = p.user_id and s.created_at > now() - interval '1 day') >= per_day;
end
$$;
revoke all on function public.yui_pair_claim(text, text) from public;
grant execute on function public.yui_pair_claim(text, text) to service_role;

-- No new code for an account past its daily budget of wrong guesses.
create function public.yui_pairings_paused() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if public.yui_limited_caller()
     and (select count(*) from public.yui_pair_strikes s
          where s.user_id = new.user_id and s.created_at > now() - interval '1 day')
         >= coalesce(public.yui_limit('pair_guesses_per_user_day'), 0) then
    raise exception 'pairing_paused' using errcode = 'PT429';
  end if;
  return new;
end
$$;
revoke all on function public.yui_pairings_paused() from public;
create trigger yui_pairings_paused before insert on public.yui_pairings
  for each row execute function public.yui_pairings_paused();
