-- Storage as the official clients call it (issue 15): what an upload's `cacheControl` asked
-- for, and the signed upload URLs already used.

-- How long a reader may cache the object, in seconds (the upload's `cacheControl`: `3600` or
-- `max-age=3600`); null is the default hour. An object never changes, so any value is safe.
alter table storage.objects add column cache_seconds integer
  check (cache_seconds between 0 and 31536000);
grant insert (cache_seconds) on storage.objects to yui_user, yui_connector;

-- A signed upload URL works once: the id of its token is kept here from the upload on (spent
-- in the transaction that inserts the object, as its signer) until the token has expired
-- anyway, when the gateway's service connection drops it. Signers may only add ids: they read
-- nothing here, and the storage schema is not exposed through /rest/v1.
create table storage.spent_upload_tokens (
  id uuid primary key,
  expires_at timestamptz not null
);
create index spent_upload_tokens_expiry_idx on storage.spent_upload_tokens (expires_at);
alter table storage.spent_upload_tokens enable row level security;
revoke all on storage.spent_upload_tokens from public, anon, yui_user, yui_connector;
grant insert on storage.spent_upload_tokens to yui_user, yui_connector;
grant select, insert, delete on storage.spent_upload_tokens to service_role;
create policy spent_upload_tokens_spend on storage.spent_upload_tokens for insert
  to yui_user, yui_connector with check (true);
