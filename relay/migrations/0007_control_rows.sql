-- Control rows: the person's Stop (and later Controls requests), and the host's one answer to
-- each. A control row is never a turn; the person writes it into their own agent's thread, and
-- a host answers only in the threads it serves.

drop policy yui_messages_user_write on public.yui_messages;
create policy yui_messages_user_write on public.yui_messages for insert to yui_user
  with check (user_id = public.yui_uid() and sender = 'user' and agent_id is not null
              and kind in ('text', 'event', 'control') and public.yui_owns_agent(agent_id));

drop policy yui_messages_connector_write on public.yui_messages;
create policy yui_messages_connector_write on public.yui_messages for insert to yui_connector
  with check (sender = 'agent' and kind in ('text', 'control') and user_id = public.yui_uid()
              and public.yui_connector_serves(agent_id));
