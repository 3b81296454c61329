-- Ours: the highest priority class a key's requests may ask for (NULL = the key's priority,
-- else normal). A column of our own limits table, which a Rust server ignores.
ALTER TABLE modelrelay_key_limits ADD COLUMN IF NOT EXISTS max_priority text;
