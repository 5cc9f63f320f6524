-- Nothing executable by PUBLIC (issue 14).
--
-- 0001 meant "nothing new is executable by default", but `alter default privileges in schema
-- public revoke execute on functions from public` does nothing: per-schema default privileges
-- only add to the global ones, and globally every role (PUBLIC) may execute every new
-- function. So each function without its own `revoke … from public` was callable by anyone
-- through `/rest/v1/rpc/<name>`, even with no key at all: the trigger functions, and helpers
-- such as yui_plain, whose line-by-line loop kept PostgreSQL busy about 3 s for one anonymous
-- call with a megabyte of short lines.
--
-- Here: PUBLIC loses EXECUTE on every function of the schemas the migrations make (public,
-- storage), whoever created it (0016–0018 included); the default is fixed globally for the role
-- that runs the migrations (`yui relay up` runs them as postgres), so a function a later
-- migration adds is executable by nobody until it says who; and the grants 0001–0015 and 0019
-- made are stated again below, by role, with why (0016 on grant their own functions, as
-- yui_pair_claim to service_role). tests/test_grants.py holds each role's list.
--
-- What needs no grant: a trigger function (PostgreSQL checks EXECUTE on it only when the
-- trigger is created, never when it fires), and whatever a SECURITY DEFINER function calls
-- (it runs as its owner). What does: a function in a policy, a column default or a
-- security_invoker view runs as the role whose query evaluates it; so does whatever an
-- invoker (non-definer) trigger or function calls; and what a client calls through
-- `/rest/v1/rpc`. `anon` (no key, or the anon key) calls nothing: signing up and pairing go
-- through `/functions/v1`, whose code runs as service_role. `authenticator` only switches role.

revoke execute on all routines in schema public, storage from public;
alter default privileges for role current_user revoke execute on functions from public;

-- The request's identity: policies on every table the app and hosts read (yui_uid), the
-- storage.objects defaults (yui_caller, yui_uid), and the invoker triggers yui_control_answer
-- (0015) and yui_messages_ack (0019) (yui_limited_caller, yui_caller). yui_uid and yui_caller
-- read the claims through yui_claim_uuid and yui_claims, as the caller.
grant execute on function public.yui_claims(), public.yui_claim_uuid(text), public.yui_uid(),
  public.yui_caller(), public.yui_limited_caller()
  to yui_user, yui_connector, service_role;
grant execute on function public.yui_cid() to yui_connector, service_role;

-- The person's policies (messages, media) and the app's agent list (security_invoker).
grant execute on function public.yui_owns_agent(uuid) to yui_user, service_role;
grant execute on function public.yui_presence(uuid, timestamptz, timestamptz, timestamptz,
  timestamptz, timestamptz, timestamptz) to yui_user, service_role;

-- The hosts' gate, in their policies on agents, messages and media.
grant execute on function public.yui_connector_serves(uuid) to yui_connector, service_role;

-- Media policies, both sides; yui_media_orphans calls yui_media_agent as the service role.
grant execute on function public.yui_media_agent(text) to yui_user, yui_connector, service_role;
grant execute on function public.yui_media_quota_ok(text) to yui_user, yui_connector;

-- A host's notes on a group, through /rest/v1/rpc (bridges/engine/mentions.py).
grant execute on function public.yui_group_notes(uuid, uuid, timestamptz, timestamptz)
  to yui_connector;

-- The gateway's own functions (rates, limits, presence) and the operator's commands
-- (`yui sweep`, `yui kill-switch`), all with the service key.
grant execute on function public.yui_limit(text), public.yui_take(text, text),
  public.yui_serving(uuid, text[]), public.yui_serving_bye(uuid, text[]),
  public.yui_suspend(text, uuid, boolean, text), public.yui_retention(boolean),
  public.yui_media_names(uuid), public.yui_media_orphans(interval)
  to service_role;
