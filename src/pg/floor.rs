//! The writer floor: the schema setup that stores it, the trigger that enforces it on
//! writers without a check of their own, and the refusal lock.
//!
//! Setup runs once per database address per process ([`ensure_schema`]), or whenever a host
//! asks ([`setup_schema`]). It takes the writer lock, lifts the statement limit for its own
//! transaction with `SET LOCAL statement_timeout = 0`, runs the host's DDL if any, creates
//! minimal `ledgers` and `row_changes` tables only where they are missing, then the
//! `writer_floor` table, the trigger function and the `ledger_writer_floor` trigger, and
//! stores the floor with `INSERT ... ON CONFLICT ... GREATEST(...)`: code can raise the
//! floor, never lower it.
//!
//! Every refusal also counts itself in the sequence [`REFUSALS_SEQUENCE`] after it takes
//! its refusal lock (a sequence keeps counting through the refused transaction's rollback),
//! so a writer that saw no refused writer at a count knows there is still none while the
//! count stays, and skips the scan of `pg_locks`, which costs each write hundreds of
//! microseconds under the writer lock.

use std::sync::Mutex;

use super::connection::{Connection, Tx};
use super::error::Error;
use super::value::Value;

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

/// The DDL of the setup after the host's own: minimal tables where missing, the floor table,
/// the trigger function and the trigger.
pub const SCHEMA_SQL: &str = r#"
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
LANGUAGE plpgsql AS $writerlock$
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
$writerlock$;

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
"#;

/// The statement that stores the floor: raises it, never lowers it.
pub const STORE_FLOOR_SQL: &str = "INSERT INTO writer_floor (name, version) VALUES ('ledger', $1) \
     ON CONFLICT (name) DO UPDATE SET version = GREATEST(writer_floor.version, EXCLUDED.version)";

/// Addresses set up by this process. A `Vec` (a handful of addresses at
/// most) rather than a hash set, whose table pointer points inside its
/// allocation: valgrind would report what it holds at exit as "possibly
/// lost" in every C program that used Postgres.
static SET_UP: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn set_up() -> std::sync::MutexGuard<'static, Vec<String>> {
    SET_UP
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether this process already set up the schema at `address` (an [`Address`]'s display
/// form, `postgresql://user@host:port/dbname`).
///
/// [`Address`]: super::Address
pub fn is_set_up(address: &str) -> bool {
    set_up().iter().any(|a| a == address)
}

/// Records that this process set up the schema at `address`, for a host that ran the setup
/// through [`Protocol::setup`](super::protocol::Protocol::setup) on a connection of its own.
pub fn mark_set_up(address: &str) {
    let mut set_up = set_up();
    if !set_up.iter().any(|a| a == address) {
        set_up.push(address.to_string());
    }
}

/// Runs [`setup_schema`] without host DDL unless this process already set up the
/// connection's address.
pub fn ensure_schema(conn: &mut Connection) -> Result<(), Error> {
    if is_set_up(&conn.address().to_string()) {
        return Ok(());
    }
    setup_schema(conn, None)
}

/// Sets up the schema and stores the connection's required floor (never lowering a higher
/// stored one), in one transaction under the writer lock, with the host's `extra_sql` (a
/// script, run first so the host's own tables win over the minimal ones).
///
/// Runs outside a transaction; an open transaction that already ran a statement is refused
/// with [`Error::AlreadyInTransaction`].
pub fn setup_schema(conn: &mut Connection, extra_sql: Option<&str>) -> Result<(), Error> {
    if let Tx::Open { statements, .. } = conn.tx {
        if statements > 0 {
            return Err(Error::AlreadyInTransaction);
        }
        conn.rollback()?;
    }
    conn.lock_writer()?;
    let result = setup_locked(conn, extra_sql);
    match result {
        Ok(()) => {
            conn.commit()?;
            mark_set_up(&conn.address().to_string());
            Ok(())
        }
        Err(err) => {
            let _ = conn.rollback();
            Err(err)
        }
    }
}

fn setup_locked(conn: &mut Connection, extra_sql: Option<&str>) -> Result<(), Error> {
    conn.execute_batch("SET LOCAL statement_timeout = 0")?;
    if let Some(extra) = extra_sql.filter(|s| !s.trim().is_empty()) {
        conn.execute_batch(extra)?;
    }
    conn.execute_batch(SCHEMA_SQL)?;
    let required = i64::from(conn.settings().get_required());
    conn.execute(STORE_FLOOR_SQL, &[Value::Int(required)])?;
    Ok(())
}

/// Whether the floor table exists: `SELECT to_regclass('writer_floor') IS NOT NULL`.
pub const FLOOR_TABLE_SQL: &str = "SELECT to_regclass('writer_floor') IS NOT NULL";

/// The stored floor (no row when none is stored; run it only when [`FLOOR_TABLE_SQL`] says
/// the table exists).
pub const STORED_FLOOR_SQL: &str = "SELECT version FROM writer_floor WHERE name = 'ledger'";

/// Reads the stored floor (`None` when there is no row).
pub(crate) fn read_floor(conn: &mut Connection) -> Result<Option<i64>, Error> {
    let rows = conn.execute(STORED_FLOOR_SQL, &[])?;
    Ok(rows
        .first()
        .and_then(|r| r.get(0))
        .and_then(Value::read_i64))
}

/// Reads the stored floor; `None` when the table or its row does not exist (no writer on
/// floor code set the database up yet).
pub fn stored_floor(conn: &mut Connection) -> Result<Option<i64>, Error> {
    let rows = conn.execute(FLOOR_TABLE_SQL, &[])?;
    if rows
        .first()
        .and_then(|r| r.get(0))
        .and_then(Value::read_bool)
        != Some(true)
    {
        return Ok(None);
    }
    read_floor(conn)
}

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

/// Takes the refusal lock: a session advisory lock that outlives the rollback and lasts
/// until this session closes. Shared and never waited for, so two refused writers with the
/// same versions do not queue behind each other.
pub(crate) fn take_refusal_lock(
    conn: &mut Connection,
    version: i64,
    floor: i64,
) -> Result<(), Error> {
    if let Some(sql) = refusal_lock_sql(version, floor) {
        conn.execute_batch(&sql)?;
    }
    Ok(())
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
    }
}
