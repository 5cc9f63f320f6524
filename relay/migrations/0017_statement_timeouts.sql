-- Statement timeouts, one per role (issue 14).
--
-- Without one, a single call could keep PostgreSQL busy as long as it liked (a 50 MB `rpc`
-- argument ran for 32 s). Each role the gateway switches to now has its own, read by the
-- gateway and set with the role for each request's transaction (PostgreSQL applies a role's
-- settings only at login, and the gateway logs in as `authenticator`), as PostgREST does.
-- A statement past its role's timeout is cancelled: 500 with SQLSTATE 57014, as PostgREST
-- answers it.
--
-- - anon, 3 s: nobody signed in; it may read nothing of Yui's, so anything slow is abuse
--   (Supabase's default for anon, so the hosted backend's too).
-- - yui_user and yui_connector, 8 s: a person's app and a host read a page of a thread or
--   write a row in milliseconds; 8 s leaves room for a slow disk and lock waits, and is
--   Supabase's default for signed-in callers.
-- - service_role, 20 s: the relay's own functions (pairing, sessions, push) and the operator's
--   `yui sweep` and kill switch, which may delete a day of rows at once. The relay client
--   gives up on a call after 20 s, so a statement running longer has nobody left to answer.
--
-- `authenticator` itself keeps no timeout: it only logs in and switches role (and Realtime's
-- LISTEN connection, which waits by design). An operator can change any of these with
-- `alter role … set statement_timeout = …`; a gateway reads them when it first serves.

alter role anon set statement_timeout = '3s';
alter role yui_user set statement_timeout = '8s';
alter role yui_connector set statement_timeout = '8s';
alter role service_role set statement_timeout = '20s';
