-- Ours: per-key limits (a key without a row has none, as every key the Rust server made) and
-- daily usage per model. A Rust server ignores both tables. Usage has no foreign key: a batch
-- of usage must never fail because one of its keys was deleted meanwhile.
CREATE TABLE IF NOT EXISTS modelrelay_key_limits (
    key_id uuid PRIMARY KEY REFERENCES server_api_keys(id) ON DELETE CASCADE,
    allowed_models text[],
    rate_limit_rpm integer,
    token_limit_tpm integer,
    priority text,
    expires_at timestamptz
);
CREATE TABLE IF NOT EXISTS modelrelay_key_usage (
    key_id uuid NOT NULL,
    day date NOT NULL,
    model text NOT NULL,
    requests bigint NOT NULL DEFAULT 0,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, day, model)
);
