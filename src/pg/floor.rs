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

use postgres::error::SqlState;

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
/// the trigger function and the trigger. The owner's step ([`setup_schema`], `writerlock pg
/// setup`): `CREATE OR REPLACE FUNCTION` needs the function's owner.
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

/// The schema check of the set-up that runs once per address per process ([`ensure_schema`],
/// [`Protocol::ensure`](super::protocol::Protocol::ensure)): one catalog read, no DDL. Its
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

/// What the schema check ([`SCHEMA_CHECK_SQL`]) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaCheck {
    /// Every object of the floor's schema is there and current: no DDL is needed.
    pub current: bool,
    /// The transaction is read-only: nothing can be stored here.
    pub read_only: bool,
}

impl SchemaCheck {
    /// Reads the row of [`SCHEMA_CHECK_SQL`] (booleans, or their text form from a driver that
    /// returns text); a missing or doubtful answer counts as not current and not read-only,
    /// so the full set-up runs.
    pub fn read(rows: &[Vec<Value>]) -> SchemaCheck {
        let row = rows.first();
        let cell = |n: usize| row.and_then(|r| r.get(n)).and_then(Value::read_bool);
        SchemaCheck {
            current: cell(0).unwrap_or(false),
            read_only: cell(1).unwrap_or(false),
        }
    }

    /// Whether the set-up runs the schema's DDL ([`SCHEMA_SQL`]): only when something is
    /// missing or not current.
    pub fn needs_ddl(&self) -> bool {
        !self.current
    }

    /// Whether the set-up stores the floor ([`STORE_FLOOR_SQL`]): always, except on a
    /// read-only server whose schema is current, where nothing can be stored and the write
    /// itself says what fails. Such a set-up is not recorded as done, so the next write
    /// tries again (after a failover, say).
    pub fn stores_floor(&self) -> bool {
        !(self.current && self.read_only)
    }
}

/// The statement that lifts the statement limit for the schema setup's own transaction.
pub const SETUP_LIMIT_SQL: &str = "SET LOCAL statement_timeout = 0";

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

/// The set-up that runs once per address per process, before the first write: unless this
/// process already set up the connection's address, it takes the writer lock, reads the
/// catalog ([`SCHEMA_CHECK_SQL`]), runs the schema's DDL only when something is missing or
/// not current, and stores the floor (`GREATEST`, never lowering it). A writer role with
/// data grants only (`SELECT, INSERT, UPDATE, DELETE` on the tables, `USAGE` on the
/// sequence) passes it once the owner ran [`setup_schema`].
///
/// On a read-only server with a current schema nothing is stored and nothing is recorded:
/// the write's own statement then fails with the server's words.
pub fn ensure_schema(conn: &mut Connection) -> Result<(), Error> {
    if is_set_up(&conn.address().to_string()) {
        return Ok(());
    }
    in_setup(conn, |conn| {
        conn.execute_batch(SETUP_LIMIT_SQL)?;
        let rows = conn.execute(SCHEMA_CHECK_SQL, &[])?;
        let rows: Vec<Vec<Value>> = rows
            .into_rows()
            .into_iter()
            .map(|r| r.into_values())
            .collect();
        let check = SchemaCheck::read(&rows);
        if check.needs_ddl() {
            conn.execute_batch(SCHEMA_SQL).map_err(owner_step)?;
        }
        if !check.stores_floor() {
            return Ok(false);
        }
        store_floor(conn)?;
        Ok(true)
    })
}

/// The error of the schema's DDL in the per-process set-up: a role without the owner's
/// rights (SQLSTATE `42501`) is told that the schema is missing or older than this code and
/// that setting it up is the owner's step; other errors are as the server gave them.
pub fn owner_step(err: Error) -> Error {
    match err {
        Error::Database {
            code,
            message,
            detail,
            hint,
        } if code == SqlState::INSUFFICIENT_PRIVILEGE => Error::Database {
            code,
            message: format!(
                "{message}: the writer floor's schema in this database is missing or older \
                 than this code, and only the owner of its tables can set it up; run \
                 `writerlock pg setup` (or setup_schema) once as that owner, then this role \
                 needs only SELECT, INSERT, UPDATE, DELETE on ledgers, row_changes and \
                 writer_floor and USAGE on the sequence writer_refusals"
            ),
            detail,
            hint,
        },
        other => other,
    }
}

/// Runs `step` in a transaction of its own under the writer lock and commits it; records the
/// address as set up when `step` says so.
fn in_setup(
    conn: &mut Connection,
    step: impl FnOnce(&mut Connection) -> Result<bool, Error>,
) -> Result<(), Error> {
    if let Tx::Open { statements, .. } = conn.tx {
        if statements > 0 {
            return Err(Error::AlreadyInTransaction);
        }
        conn.rollback()?;
    }
    conn.lock_writer()?;
    match step(conn) {
        Ok(done) => {
            conn.commit()?;
            if done {
                mark_set_up(&conn.address().to_string());
            }
            Ok(())
        }
        Err(err) => {
            let _ = conn.rollback();
            Err(err)
        }
    }
}

fn store_floor(conn: &mut Connection) -> Result<(), Error> {
    let required = i64::from(conn.settings().get_required());
    conn.execute(STORE_FLOOR_SQL, &[Value::Int(required)])?;
    Ok(())
}

/// Sets up the schema and stores the connection's required floor (never lowering a higher
/// stored one), in one transaction under the writer lock, with the host's `extra_sql` (a
/// script, run first so the host's own tables win over the minimal ones).
///
/// Runs outside a transaction; an open transaction that already ran a statement is refused
/// with [`Error::AlreadyInTransaction`].
pub fn setup_schema(conn: &mut Connection, extra_sql: Option<&str>) -> Result<(), Error> {
    in_setup(conn, |conn| {
        conn.execute_batch(SETUP_LIMIT_SQL)?;
        if let Some(extra) = extra_sql.filter(|s| !s.trim().is_empty()) {
            conn.execute_batch(extra)?;
        }
        conn.execute_batch(SCHEMA_SQL)?;
        store_floor(conn)?;
        Ok(true)
    })
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
