-- The rows a reply answers, planned with the reply's values (issue 21).
--
-- yui_turn_open and yui_group_accept (0037) look up the person rows a reply names in
-- `meta.turn` by id, with the reply's person and agent as further conditions. plpgsql keeps a
-- generic plan for such a statement after a few calls, one planned without the values; on a
-- relay with many people that plan may read the person's and the agent's whole history by
-- (user_id, created_at) and (agent_id, created_at) and intersect them: CI saw the turns of a
-- 20,000-row thread read 20,000 entries of each of those indexes. Planned for each call with
-- its values, a long thread's person and agent are known to be large, and the ids are looked
-- up by the primary key. The cost: a plan a call (tens of microseconds).

alter function public.yui_turn_open(public.yui_messages) set plan_cache_mode = force_custom_plan;
alter function public.yui_group_accept() set plan_cache_mode = force_custom_plan;
