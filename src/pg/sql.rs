//! Every statement the writer session runs, in one place: the writer lock, the floor check
//! and the refusal-count shortcut, the refusal lock, the refused-writers query, the floor's
//! schema and its catalog check, and the administrator's queries.
//!
//! The I/O-free [`Protocol`](super::protocol::Protocol) hands these out (to this crate's own
//! [`Connection`](super::Connection) and to hosts that run them on connections of their
//! own); [`floor`](super::floor), [`alerts`](super::alerts), [`admin`](super::admin) and the
//! `writerlock` command read their answers. Nothing here runs a statement. The values in the
//! text are the ledger spec's constants, so each statement can be sent as it is, through the
//! simple or the extended query protocol.

use std::sync::LazyLock;

use super::settings::VERSION_SETTING;
#[cfg(test)]
use super::settings::WRITER_LOCK;

/// The writer lock statement: `SELECT pg_advisory_xact_lock(1279607879)`.
pub const WRITER_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(1279607879)";

/// The refusal lock's class id: 0x4C574652 (`LWFR`), 1280788050.
pub const REFUSED_LOCK_CLASS: i32 = 0x4C57_4652;

/// The refusal lock's sub id in `pg_locks.objsubid` (a two-key advisory lock): 2.
pub const REFUSED_LOCK_SUBID: i16 = 2;

/// The name of the floor's row in `writer_floor`: `ledger`.
pub const FLOOR_NAME: &str = "ledger";

/// The sequence that counts refusals: `writer_refusals`.
pub const REFUSALS_SEQUENCE: &str = "writer_refusals";

/// The name of the trigger on `ledgers`: `ledger_writer_floor`.
pub const TRIGGER_NAME: &str = "ledger_writer_floor";

/// The body of the trigger function `ledger_writer_floor_check()`, as `pg_proc.prosrc`
/// stores it: the schema check compares it, so a function that is already current is never
/// replaced (only its owner could).
macro_rules! floor_check_body {
    () => {
        r#"
DECLARE
    sent text := current_setting('agentihooks.ledger_writer_version', true);
    writer integer := 0;
    floor_version integer;
BEGIN
    IF sent ~ '^\s*[0-9]{1,9}\s*$' THEN
        writer := LEAST(trim(sent)::integer, 32767);
    END IF;
    SELECT f.version INTO floor_version FROM writer_floor f WHERE f.name = 'ledger';
    IF floor_version IS NOT NULL AND writer < floor_version AND NOT EXISTS (
        SELECT 1 FROM row_changes r WHERE r.slug = NEW.slug AND r.generation = NEW.generation
    ) THEN
        PERFORM pg_try_advisory_lock_shared(1280788050, writer * 65536 + floor_version);
        -- After the lock: a writer that finds the count moved sees the lock. A sequence
        -- keeps counting through the rollback; without it the refusal still happens.
        BEGIN
            PERFORM nextval(to_regclass('writer_refusals'));
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        RAISE EXCEPTION USING
            ERRCODE = 'LW001',
            MESSAGE = format(
                'ledger writer version %s is below version %s, the oldest the shared database allows; update its code and restart it',
                writer, floor_version);
    END IF;
    RETURN NEW;
END
"#
    };
}

/// The body of `ledger_writer_floor_check()` (see [`SCHEMA_SQL`]).
pub const FLOOR_CHECK_BODY: &str = floor_check_body!();

/// The DDL of the setup after the host's own: minimal tables where missing, the floor table,
/// the trigger function and the trigger. The owner's step
/// ([`Protocol::setup`](super::protocol::Protocol::setup), `writerlock pg setup`):
/// `CREATE OR REPLACE FUNCTION` needs the function's owner.
pub const SCHEMA_SQL: &str = concat!(
    r#"
DO $writerlock$
BEGIN
    IF to_regclass('ledgers') IS NULL THEN
        CREATE TABLE ledgers (
            slug text PRIMARY KEY,
            generation bigint NOT NULL DEFAULT 0
        );
    END IF;
    IF to_regclass('row_changes') IS NULL THEN
        CREATE TABLE row_changes (
            slug text NOT NULL,
            generation bigint NOT NULL,
            row_key text,
            changed_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX row_changes_slug_generation ON row_changes (slug, generation);
    END IF;
END
$writerlock$;

CREATE SEQUENCE IF NOT EXISTS writer_refusals;
GRANT USAGE, SELECT ON SEQUENCE writer_refusals TO PUBLIC;
-- Counted once, so the count reads as a number from here on (NULL: no counter).
SELECT nextval('writer_refusals');

CREATE TABLE IF NOT EXISTS writer_floor (
    name text PRIMARY KEY,
    version integer NOT NULL CHECK (version BETWEEN 0 AND 32767)
);

CREATE OR REPLACE FUNCTION ledger_writer_floor_check() RETURNS trigger
LANGUAGE plpgsql AS $writerlock$"#,
    floor_check_body!(),
    r#"$writerlock$;

DO $writerlock$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_trigger
        WHERE tgname = 'ledger_writer_floor' AND tgrelid = 'ledgers'::regclass
    ) THEN
        CREATE TRIGGER ledger_writer_floor
            BEFORE UPDATE ON ledgers
            FOR EACH ROW
            WHEN (OLD.generation IS DISTINCT FROM NEW.generation)
            EXECUTE FUNCTION ledger_writer_floor_check();
    END IF;
END
$writerlock$;
"#
);

/// The schema check of the set-up that runs once per address per process
/// ([`Protocol::ensure`](super::protocol::Protocol::ensure)): one catalog read, no DDL. Its
/// row says whether every object [`SCHEMA_SQL`] makes is there and current (the tables, the
/// refusal counter counted once and usable by this role, the trigger function with this
/// body, the trigger), and whether the transaction is read-only (a standby, or
/// `default_transaction_read_only`). When both are current the set-up runs no DDL, so a
/// writer role with data grants only passes it.
pub const SCHEMA_CHECK_SQL: &str = concat!(
    "SELECT to_regclass('ledgers') IS NOT NULL \
     AND to_regclass('row_changes') IS NOT NULL \
     AND to_regclass('writer_floor') IS NOT NULL \
     AND COALESCE((SELECT CASE WHEN has_sequence_privilege(s.oid, 'USAGE') \
         THEN pg_sequence_last_value(s.oid) IS NOT NULL ELSE false END \
         FROM pg_class s WHERE s.oid = to_regclass('writer_refusals') AND s.relkind = 'S'), false) \
     AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgname = 'ledger_writer_floor' \
         AND t.tgrelid = to_regclass('ledgers') \
         AND t.tgfoid = to_regprocedure('ledger_writer_floor_check()')) \
     AND EXISTS (SELECT 1 FROM pg_proc p \
         WHERE p.oid = to_regprocedure('ledger_writer_floor_check()') \
         AND p.prosrc = $writerlock$",
    floor_check_body!(),
    "$writerlock$), current_setting('transaction_read_only') = 'on'"
);

/// The statement that lifts the statement limit for the schema setup's own transaction.
pub const SETUP_LIMIT_SQL: &str = "SET LOCAL statement_timeout = 0";

/// The statement that stores the floor: raises it, never lowers it.
pub const STORE_FLOOR_SQL: &str = "INSERT INTO writer_floor (name, version) VALUES ('ledger', $1) \
     ON CONFLICT (name) DO UPDATE SET version = GREATEST(writer_floor.version, EXCLUDED.version)";

/// The floor check, run under the writer lock, for a host that knows no refusal count at
/// which it found no refused writer (its first write): the stored floor (`NULL` when none),
/// the session's writer version as the server sees it (`NULL` when unset), whether any
/// refused writer's lock is held in this database (the scan of `pg_locks`,
/// [`ANY_REFUSED_SQL`]'s), and the refusal count (`pg_sequence_last_value` of
/// [`REFUSALS_SEQUENCE`], `NULL` on a database without the counter). One round trip; the
/// join that names the refused writers runs only when one is held.
pub fn floor_check_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT (SELECT version FROM writer_floor WHERE name = '{FLOOR_NAME}'), \
             current_setting('{VERSION_SETTING}', true), \
             EXISTS ({ANY_REFUSED_SCAN}), \
             pg_sequence_last_value(to_regclass('{REFUSALS_SEQUENCE}'))"
        )
    });
    &SQL
}

/// The floor check for a host that knows the refusal count at which it last found no
/// refused writer: the same four columns without the scan (the third is `NULL`, not
/// asked). While the count stays, no refused writer can have appeared, so the scan of
/// `pg_locks` ([`ANY_REFUSED_SQL`]) runs as a statement of its own only when the count
/// moved or is `NULL`.
pub fn floor_check_sql_without_scan() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT (SELECT version FROM writer_floor WHERE name = '{FLOOR_NAME}'), \
             current_setting('{VERSION_SETTING}', true), \
             NULL::boolean, \
             pg_sequence_last_value(to_regclass('{REFUSALS_SEQUENCE}'))"
        )
    });
    &SQL
}

/// The name a session that talks to the server directly prepares
/// [`floor_check_sql_without_scan`] under, so the check runs under the writer lock
/// without being parsed and planned again ([`EXECUTE_FLOOR_CHECK_SQL`]).
pub const FLOOR_CHECK_STATEMENT: &str = "writerlock_floor_check";

/// Prepares [`floor_check_sql_without_scan`] as [`FLOOR_CHECK_STATEMENT`] (once per
/// session; a prepared statement outlives the transaction it was made in).
pub fn prepare_floor_check_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "PREPARE {FLOOR_CHECK_STATEMENT} AS {}",
            floor_check_sql_without_scan()
        )
    });
    &SQL
}

/// Runs the floor check [`prepare_floor_check_sql`] prepared: the same four columns as
/// [`floor_check_sql_without_scan`].
pub const EXECUTE_FLOOR_CHECK_SQL: &str = "EXECUTE writerlock_floor_check";

/// The refusal locks held in this database (the body of [`ANY_REFUSED_SQL`]'s `EXISTS`).
macro_rules! any_refused_scan {
    () => {
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
         AND classid = 1280788050 AND objsubid = 2 \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    };
}

const ANY_REFUSED_SCAN: &str = any_refused_scan!();

/// Whether any refused writer's lock is held in this database: a scan of `pg_locks`, run
/// under the writer lock when the refusal count moved since the host last found none.
pub const ANY_REFUSED_SQL: &str = concat!("SELECT EXISTS (", any_refused_scan!(), ")");

/// The floor-storing statement with the required floor written in: raises the stored floor,
/// never lowers it.
pub fn store_floor_sql(required: u16) -> String {
    STORE_FLOOR_SQL.replace("$1", &required.to_string())
}

/// Whether the floor table exists: `SELECT to_regclass('writer_floor') IS NOT NULL`.
pub const FLOOR_TABLE_SQL: &str = "SELECT to_regclass('writer_floor') IS NOT NULL";

/// The stored floor (no row when none is stored; run it only when [`FLOOR_TABLE_SQL`] says
/// the table exists).
pub const STORED_FLOOR_SQL: &str = "SELECT version FROM writer_floor WHERE name = 'ledger'";

/// The ledger spec's query for refused writers still connected to the current database.
pub const REFUSED_WRITERS_SQL: &str = "\
SELECT DISTINCT COALESCE(host(a.client_addr), 'an unseen client') AS writer, a.pid, \
       l.objid::BIGINT / 65536 AS version, l.objid::BIGINT % 65536 AS floor \
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
WHERE l.locktype = 'advisory' AND l.classid = 1280788050 AND l.objsubid = 2 \
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
ORDER BY a.pid, version, floor";

/// The ledger spec's holder query, limited to the current database (advisory locks are
/// per database), with each session's `application_name`: sessions holding or waiting for
/// the writer lock, holder first.
pub const HOLDERS_SQL: &str = "\
SELECT a.pid, l.granted, a.state, EXTRACT(EPOCH FROM now() - a.state_change)::float8 AS in_state, \
       host(a.client_addr) AS client_addr, a.application_name \
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = 1279607879 AND l.objsubid = 1 \
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
ORDER BY l.granted DESC, a.state_change";

/// The ledger spec's unrecorded-bumps query: each ledger whose newest generation has no
/// `row_changes` row.
pub const UNRECORDED_BUMPS_SQL: &str = "\
SELECT l.slug, l.generation FROM ledgers l \
WHERE NOT EXISTS (SELECT 1 FROM row_changes r WHERE r.slug = l.slug AND r.generation = l.generation) \
ORDER BY l.slug";

/// The object id of the refusal lock of a writer `version` below `floor`:
/// `version * 65536 + floor`.
pub fn refusal_lock_key(version: i64, floor: i64) -> i64 {
    version * 65_536 + floor
}

/// The statement that takes the refusal lock of a writer `version` below `floor`: a shared
/// session advisory lock that outlives the rollback and lasts until the session closes,
/// never waited for. `None` when the key does not fit the lock's 32-bit object id.
pub fn refusal_lock_sql(version: i64, floor: i64) -> Option<String> {
    let key = i32::try_from(refusal_lock_key(version, floor)).ok()?;
    // The lock first (a subquery with a volatile call is run before the outer list), then
    // the refusal counts itself (see the module's text).
    Some(format!(
        "SELECT l.locked, nextval(to_regclass('{REFUSALS_SEQUENCE}')) FROM \
         (SELECT pg_try_advisory_lock_shared({REFUSED_LOCK_CLASS}, {key}) AS locked) AS l"
    ))
}

/// [`refusal_lock_sql`] for a session that dialled the server at TCP `port` (`None`: a
/// Unix socket): the lock is taken only where the server sees the session come in that
/// way. Behind a pooler the server sees another port, and the lock would stay on a server
/// connection that other clients share (and name the pooler rather than the writer).
pub fn refusal_lock_sql_if_direct(version: i64, floor: i64, port: Option<u16>) -> Option<String> {
    let key = i32::try_from(refusal_lock_key(version, floor)).ok()?;
    let expected = port.map_or_else(|| "NULL".to_string(), |p| p.to_string());
    Some(format!(
        "SELECT l.locked, nextval(to_regclass('{REFUSALS_SEQUENCE}')) FROM \
         (SELECT CASE WHEN inet_server_port() IS NOT DISTINCT FROM {expected} \
         THEN pg_try_advisory_lock_shared({REFUSED_LOCK_CLASS}, {key}) ELSE false END \
         AS locked) AS l"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_key() {
        assert_eq!(REFUSED_LOCK_CLASS, 1_280_788_050);
        assert_eq!(refusal_lock_key(0, 1), 1);
        assert_eq!(refusal_lock_key(1, 2), 65_538);
    }

    #[test]
    fn statements_name_the_ledger_specs_constants() {
        assert!(WRITER_LOCK_SQL.ends_with(&format!("({WRITER_LOCK})")));
        for sql in [ANY_REFUSED_SQL, REFUSED_WRITERS_SQL] {
            assert!(
                sql.contains(&format!("classid = {REFUSED_LOCK_CLASS}")),
                "{sql}"
            );
            assert!(
                sql.contains(&format!("objsubid = {REFUSED_LOCK_SUBID}")),
                "{sql}"
            );
        }
        assert!(HOLDERS_SQL.contains(&format!("objid = {WRITER_LOCK}")));
        assert!(floor_check_sql().contains(REFUSALS_SEQUENCE));
        assert!(floor_check_sql().contains(VERSION_SETTING));
        assert!(SCHEMA_SQL.contains(REFUSALS_SEQUENCE));
        assert!(SCHEMA_SQL.contains(&format!("CREATE TRIGGER {TRIGGER_NAME}")));
        assert_eq!(store_floor_sql(3), STORE_FLOOR_SQL.replace("$1", "3"));
    }

    #[test]
    fn schema_names_the_ledger_specs_objects() {
        for needle in [
            "BEFORE UPDATE ON ledgers",
            "FOR EACH ROW",
            "CREATE TRIGGER ledger_writer_floor",
            "ERRCODE = 'LW001'",
            "agentihooks.ledger_writer_version",
            "1280788050",
        ] {
            assert!(SCHEMA_SQL.contains(needle), "{needle}");
        }
        assert!(STORED_FLOOR_SQL.ends_with(&format!("name = '{FLOOR_NAME}'")));
        assert!(SCHEMA_CHECK_SQL.contains(FLOOR_CHECK_BODY));
        assert!(SCHEMA_SQL.contains(FLOOR_CHECK_BODY));
    }
}
