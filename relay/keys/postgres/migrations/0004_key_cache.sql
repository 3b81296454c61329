-- Ours: how a key's requests use the response cache ('default': unless they say otherwise;
-- 'off': never; NULL: only when they ask). A column of our own limits table, which a Rust
-- server ignores.
ALTER TABLE modelrelay_key_limits ADD COLUMN IF NOT EXISTS cache text;
