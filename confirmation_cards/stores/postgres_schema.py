"""The PostgreSQL card store's schema, as versioned steps ``PostgresCardStore`` applies in order at
open, each once, under an advisory lock (``confirmation_cards.stores.postgres``)."""

MIGRATIONS: tuple[str, ...] = (
    # 1: cards (with the lease and lookup columns the SQLite store grew in its migrations 1–3),
    # the audit trail, and the triggers that keep it append-only.
    """
    CREATE TABLE maya_cards (
        id          TEXT PRIMARY KEY,
        status      TEXT NOT NULL,
        created_at  DOUBLE PRECISION NOT NULL,
        expires_at  DOUBLE PRECISION NOT NULL,
        data        TEXT NOT NULL,
        principal   TEXT NOT NULL,
        action      TEXT NOT NULL,
        digest      TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        executor    TEXT,
        lease_until DOUBLE PRECISION,
        sending     BOOLEAN NOT NULL DEFAULT false,
        link_hash   TEXT
    );
    CREATE INDEX maya_cards_lookup ON maya_cards (digest, action, principal, status, created_at);
    CREATE INDEX maya_cards_due ON maya_cards (status, expires_at);
    CREATE TABLE maya_audit (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        card_id      TEXT NOT NULL,
        at           TIMESTAMPTZ NOT NULL,
        event        TEXT NOT NULL,
        by           TEXT,
        status_code  INTEGER,
        operation_id TEXT,
        rule         TEXT,
        detail       TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX maya_audit_card ON maya_audit (card_id, seq);
    CREATE FUNCTION maya_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'the audit trail is append-only';
    END
    $$;
    CREATE TRIGGER maya_audit_no_change BEFORE UPDATE OR DELETE ON maya_audit
        FOR EACH ROW EXECUTE FUNCTION maya_audit_append_only();
    CREATE TRIGGER maya_audit_no_truncate BEFORE TRUNCATE ON maya_audit
        FOR EACH STATEMENT EXECUTE FUNCTION maya_audit_append_only();
    """,
    # 2: the policy's approvals (MAYA_POLICY), append-only, one per person per card; a card's own
    # data carries them too (Card.approvals, Card.policy: null on older cards).
    """
    CREATE TABLE maya_approvals (
        card_id   TEXT NOT NULL,
        principal TEXT NOT NULL,
        at        TIMESTAMPTZ NOT NULL,
        data      TEXT NOT NULL,
        PRIMARY KEY (card_id, principal)
    );
    CREATE TRIGGER maya_approvals_no_change BEFORE UPDATE OR DELETE ON maya_approvals
        FOR EACH ROW EXECUTE FUNCTION maya_audit_append_only();
    CREATE TRIGGER maya_approvals_no_truncate BEFORE TRUNCATE ON maya_approvals
        FOR EACH STATEMENT EXECUTE FUNCTION maya_audit_append_only();
    """,
    # 3: what the audit log's lines carry beyond the row (the card's status after it, Door's request
    # id, the replica that wrote it), and an index for reading the audit by time.
    """
    ALTER TABLE maya_audit ADD COLUMN status TEXT, ADD COLUMN request_id TEXT, ADD COLUMN replica TEXT;
    CREATE INDEX maya_audit_at ON maya_audit (at);
    """,
)
