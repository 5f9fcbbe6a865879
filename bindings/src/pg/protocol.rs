//! `wl_pg_protocol`: the writer session without I/O, for a program that runs
//! the statements on a Postgres connection of its own (libpq).
//!
//! The protocol hands out one statement at a time (`WL_PG_STEP_RUN`); the
//! program runs it (libpq's `PQexec`) and feeds the outcome back: the rows
//! (`wl_pg_protocol_feed_rows`), the server's error
//! (`wl_pg_protocol_feed_error`) or a lost connection
//! (`wl_pg_protocol_feed_lost`). The protocol answers with the next step
//! until the write is granted (`WL_PG_STEP_GRANTED`), finished
//! (`WL_PG_STEP_DONE`) or failed (`WL_PG_STEP_FAILED`). Every decision (the
//! waits for the writer lock, what `55P03` means, the floor refusal, which
//! refused writers to name) is the core's, the same the library's own
//! connections make.

use std::ffi::{c_char, CString};

use writerlock::pg::{Protocol, Reply, ServerError, Step, TxState, WriteStart};

use super::settings::{settings_of, wl_pg_settings};
use super::text_rows::wl_pg_text_rows;
use super::write::wl_pg_write;
use crate::error::{wl_error, wl_result};
use crate::ffi::{c_string, put, put_opt, run, try_mut, try_opt_str, try_out, try_str, value};

/// Where the program's connection stands when a write or set-up starts
/// (`WL_PG_TX_*`).
#[allow(non_camel_case_types)]
pub type wl_pg_tx_state = u32;

/// No transaction is open (libpq's `PQTRANS_IDLE`): the protocol sends
/// `BEGIN` itself.
pub const WL_PG_TX_IDLE: wl_pg_tx_state = 0;

/// A transaction is open but has run no statement: the writer lock is its
/// first.
pub const WL_PG_TX_OPEN_UNUSED: wl_pg_tx_state = 1;

/// A transaction is open and has run a statement: a write or set-up fails
/// at once with `WL_STATE` (`cannot start a transaction within a
/// transaction`).
pub const WL_PG_TX_OPEN_USED: wl_pg_tx_state = 2;

/// What the program does next (`WL_PG_STEP_*`), from `wl_pg_protocol_start`
/// and the `wl_pg_protocol_feed_*` functions.
#[allow(non_camel_case_types)]
pub type wl_pg_step = u32;

/// No step: the call was refused (a NULL or invalid argument, a call out of
/// order) and the protocol did not move.
pub const WL_PG_STEP_NONE: wl_pg_step = 0;

/// Run the statement `wl_pg_protocol_sql` gives and feed its outcome back.
pub const WL_PG_STEP_RUN: wl_pg_step = 1;

/// The write transaction is open and holds the writer lock: run the
/// write's statements, then end it with a `wl_pg_protocol_end` protocol.
/// `wl_pg_protocol_granted` gives the waits, the floor, the refused writers
/// and the alerts to raise.
pub const WL_PG_STEP_GRANTED: wl_pg_step = 2;

/// Finished: the set-up or the end of the write committed, or a rollback
/// asked for ran.
pub const WL_PG_STEP_DONE: wl_pg_step = 3;

/// Finished with an error (the function returns its code and records it as
/// the thread's last error; `wl_pg_protocol_error` keeps a copy). No
/// transaction is left open: it was rolled back, or the session is gone.
pub const WL_PG_STEP_FAILED: wl_pg_step = 4;

/// What a statement is for (`WL_PG_KIND_*`, stable numbers). A program
/// that runs every statement as it comes (libpq's `PQexec`) needs none of
/// them; one whose driver manages transactions itself maps `BEGIN`,
/// `ROLLBACK` and `COMMIT` to its own calls.
#[allow(non_camel_case_types)]
pub type wl_pg_statement_kind = u32;

/// No statement is waiting to run.
pub const WL_PG_KIND_NONE: wl_pg_statement_kind = 0;
/// `BEGIN`.
pub const WL_PG_KIND_BEGIN: wl_pg_statement_kind = 1;
/// `SELECT pg_advisory_xact_lock(1279607879)`: one wait for the writer lock.
pub const WL_PG_KIND_WRITER_LOCK: wl_pg_statement_kind = 2;
/// The floor check: the stored floor, the session's writer version, and
/// whether a refused writer's lock is held.
pub const WL_PG_KIND_FLOOR_CHECK: wl_pg_statement_kind = 3;
/// `BEGIN` (when no transaction is open), the writer lock and the floor
/// check as one message (`wl_pg_protocol_write_in_one_message`); feed the
/// floor check's rows (`PQexec` returns the last statement's result).
pub const WL_PG_KIND_START_WRITE: wl_pg_statement_kind = 4;
/// The refusal lock a writer below the floor takes, for the alerts.
pub const WL_PG_KIND_REFUSAL_LOCK: wl_pg_statement_kind = 5;
/// The refused writers still connected.
pub const WL_PG_KIND_REFUSED_WRITERS: wl_pg_statement_kind = 6;
/// `SET LOCAL statement_timeout = 0`, for the schema set-up.
pub const WL_PG_KIND_SETUP_LIMIT: wl_pg_statement_kind = 7;
/// The program's own schema script (`wl_pg_protocol_setup`).
pub const WL_PG_KIND_HOST_SCHEMA: wl_pg_statement_kind = 8;
/// The catalog read that tells whether the floor's schema is current.
pub const WL_PG_KIND_SCHEMA_CHECK: wl_pg_statement_kind = 9;
/// The floor's schema (several statements).
pub const WL_PG_KIND_SCHEMA: wl_pg_statement_kind = 10;
/// The statement that stores the floor, never lowering it.
pub const WL_PG_KIND_STORE_FLOOR: wl_pg_statement_kind = 11;
/// `ROLLBACK`.
pub const WL_PG_KIND_ROLLBACK: wl_pg_statement_kind = 12;
/// `COMMIT`.
pub const WL_PG_KIND_COMMIT: wl_pg_statement_kind = 13;
/// Whether any refused writer's lock is held (a scan of `pg_locks`), run on
/// its own only for a protocol given a clean refusal count
/// (`wl_pg_protocol_known_clean`) when the floor check read another one.
pub const WL_PG_KIND_ANY_REFUSED: wl_pg_statement_kind = 14;
/// A statement of a kind newer than this header: `wl_pg_protocol_kind_name`
/// names it. Run it like any other.
pub const WL_PG_KIND_OTHER: wl_pg_statement_kind = 255;

/// The stable number of each kind, by the core's name for it (so a kind the
/// core adds is `WL_PG_KIND_OTHER` here until it gets a number, never a
/// build break).
const KINDS: [(&str, wl_pg_statement_kind); 14] = [
    ("begin", WL_PG_KIND_BEGIN),
    ("writer_lock", WL_PG_KIND_WRITER_LOCK),
    ("floor_check", WL_PG_KIND_FLOOR_CHECK),
    ("start_write", WL_PG_KIND_START_WRITE),
    ("refusal_lock", WL_PG_KIND_REFUSAL_LOCK),
    ("refused_writers", WL_PG_KIND_REFUSED_WRITERS),
    ("setup_limit", WL_PG_KIND_SETUP_LIMIT),
    ("host_schema", WL_PG_KIND_HOST_SCHEMA),
    ("schema_check", WL_PG_KIND_SCHEMA_CHECK),
    ("schema", WL_PG_KIND_SCHEMA),
    ("store_floor", WL_PG_KIND_STORE_FLOOR),
    ("rollback", WL_PG_KIND_ROLLBACK),
    ("commit", WL_PG_KIND_COMMIT),
    ("any_refused", WL_PG_KIND_ANY_REFUSED),
];

fn kind_code(name: &str) -> wl_pg_statement_kind {
    KINDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(WL_PG_KIND_OTHER, |(_, code)| *code)
}

/// Where a protocol object stands, as the C calls see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Made; `wl_pg_protocol_start` comes next.
    New,
    /// A statement was handed out; its outcome comes next.
    Running,
    /// Granted, done or failed.
    Finished,
}

/// The statement a `WL_PG_STEP_RUN` handed out, as C text.
struct Pending {
    sql: CString,
    kind: wl_pg_statement_kind,
    kind_name: CString,
}

/// The writer protocol of one write, schema set-up or end of a write, for a
/// program that runs the statements on a Postgres connection of its own.
///
/// Created with `wl_pg_protocol_write`, `wl_pg_protocol_write_in_one_message`,
/// `wl_pg_protocol_ensure`, `wl_pg_protocol_setup` or `wl_pg_protocol_end`;
/// freed with `wl_pg_protocol_free`. Driven with `wl_pg_protocol_start`, then
/// one `wl_pg_protocol_feed_*` call per statement. Freeing it sends nothing:
/// a transaction the program opened for it stays open. Do not use it from two
/// threads at once.
#[allow(non_camel_case_types)]
pub struct wl_pg_protocol {
    inner: Protocol,
    phase: Phase,
    pending: Option<Pending>,
    granted: Option<WriteStart>,
    error: Option<wl_error>,
}

fn tx_state(tx: wl_pg_tx_state) -> Result<TxState, wl_error> {
    match tx {
        WL_PG_TX_IDLE => Ok(TxState::Idle),
        WL_PG_TX_OPEN_UNUSED => Ok(TxState::OpenUnused),
        WL_PG_TX_OPEN_USED => Ok(TxState::OpenUsed),
        other => Err(crate::ffi::invalid(
            "tx",
            format!(
                "{other} is not WL_PG_TX_IDLE (0), WL_PG_TX_OPEN_UNUSED (1) or \
                 WL_PG_TX_OPEN_USED (2)"
            ),
        )),
    }
}

/// Settings a protocol can work with (NULL: the defaults).
fn checked_settings(settings: *const wl_pg_settings) -> Result<writerlock::pg::Settings, wl_error> {
    let settings = settings_of(settings);
    settings.validate()?;
    Ok(settings)
}

fn make(out: *mut *mut wl_pg_protocol, inner: Protocol) {
    put(
        out,
        Box::into_raw(Box::new(wl_pg_protocol {
            inner,
            phase: Phase::New,
            pending: None,
            granted: None,
            error: None,
        })),
    );
}

/// Makes the protocol of a write for a writer with `settings` (NULL: the
/// defaults; its version, lock tries and lock wait) on a connection in state
/// `tx` (`WL_PG_TX_*`): `BEGIN` when none is open, the writer lock with its
/// waits, the floor check, and the refused writers when one is there to
/// name. It ends with `WL_PG_STEP_GRANTED`, or `WL_PG_STEP_FAILED` with
/// `WL_PG_NOT_GRANTED` (`the ledger writer lock was not granted in 3 waits
/// of 10 seconds`), `WL_PG_REFUSED` (`LW001`, below the floor),
/// `WL_PG_SETTING` (the session does not carry this writer's version), or
/// what the server or connection said.
///
/// On success `*out` is owned by the caller and freed with
/// `wl_pg_protocol_free`. `WL_INVALID_ARGUMENT` for settings that cannot
/// work or an unknown `tx`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_write(
    settings: *const wl_pg_settings,
    tx: wl_pg_tx_state,
    out: *mut *mut wl_pg_protocol,
) -> wl_result {
    run("wl_pg_protocol_write", || {
        let out = try_out!(out);
        let settings = checked_settings(settings)?;
        make(out, Protocol::write(&settings, tx_state(tx)?));
        Ok(())
    })
}

/// The same write with fewer round trips, for a connection that runs
/// several statements sent as one string (libpq's `PQexec`, the simple
/// query protocol): each attempt is one `WL_PG_KIND_START_WRITE` statement,
/// `BEGIN` (when no transaction is open), the writer lock and the floor
/// check together; feed it the result `PQexec` returns (the floor check's
/// rows, or the error that stopped it). The writer lock stays the
/// transaction's first statement.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_write_in_one_message(
    settings: *const wl_pg_settings,
    tx: wl_pg_tx_state,
    out: *mut *mut wl_pg_protocol,
) -> wl_result {
    run("wl_pg_protocol_write_in_one_message", || {
        let out = try_out!(out);
        let settings = checked_settings(settings)?;
        make(
            out,
            Protocol::write_in_one_message(&settings, tx_state(tx)?),
        );
        Ok(())
    })
}

/// Makes the protocol of the set-up to run once per database per process,
/// before the first write: the writer lock with its waits, `SET LOCAL
/// statement_timeout = 0`, a catalog read, the floor's schema only when
/// something is missing or not current, the stored floor raised to
/// `settings`' required floor (never lowered), and `COMMIT`. It ends with
/// `WL_PG_STEP_DONE` (`wl_pg_protocol_set_up` then says whether the floor
/// was stored: on a read-only server it is not, and the next write should
/// try again) or `WL_PG_STEP_FAILED`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_ensure(
    settings: *const wl_pg_settings,
    tx: wl_pg_tx_state,
    out: *mut *mut wl_pg_protocol,
) -> wl_result {
    run("wl_pg_protocol_ensure", || {
        let out = try_out!(out);
        let settings = checked_settings(settings)?;
        make(out, Protocol::ensure(&settings, tx_state(tx)?));
        Ok(())
    })
}

/// Makes the protocol of the owner's schema set-up: the writer lock with
/// its waits, `SET LOCAL statement_timeout = 0`, the program's own
/// `extra_sql` (NULL or blank: none; it may hold several statements), the
/// floor's schema, the stored floor raised to `settings`' required floor,
/// and `COMMIT`. It ends with `WL_PG_STEP_DONE` or `WL_PG_STEP_FAILED`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_setup(
    settings: *const wl_pg_settings,
    extra_sql: *const c_char,
    tx: wl_pg_tx_state,
    out: *mut *mut wl_pg_protocol,
) -> wl_result {
    run("wl_pg_protocol_setup", || {
        let out = try_out!(out);
        let extra_sql = try_opt_str!(extra_sql);
        let settings = checked_settings(settings)?;
        make(out, Protocol::setup(&settings, extra_sql, tx_state(tx)?));
        Ok(())
    })
}

/// Makes the protocol that ends a granted write: `COMMIT` when `commit` is
/// true and no statement of the transaction failed, else `ROLLBACK`. A
/// commit asked for after a failed statement (`statement_failed`) rolls back
/// and fails with `WL_PG_ROLLED_BACK`; a connection lost during `COMMIT`
/// fails with `WL_PG_OUTCOME_UNKNOWN` (the write may or may not be stored).
/// It ends with `WL_PG_STEP_DONE` or `WL_PG_STEP_FAILED`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_end(
    commit: bool,
    statement_failed: bool,
    out: *mut *mut wl_pg_protocol,
) -> wl_result {
    run("wl_pg_protocol_end", || {
        let out = try_out!(out);
        make(out, Protocol::end(commit, statement_failed));
        Ok(())
    })
}

/// Frees a protocol (nothing is sent). NULL is ignored.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_free(protocol: *mut wl_pg_protocol) {
    value("wl_pg_protocol_free", (), || {
        drop(crate::ffi::take_box(protocol));
    })
}

fn set_dialled(protocol: *mut wl_pg_protocol, port: Option<u16>) -> Result<(), wl_error> {
    let protocol = try_mut!(protocol);
    let inner = std::mem::replace(&mut protocol.inner, Protocol::end(false, false));
    protocol.inner = inner.dialled(port);
    Ok(())
}

/// Tells the protocol that the program's connection reached the server over
/// TCP at `port` (libpq's `PQport`). A writer refused below the floor then
/// takes its refusal lock (which names it in the current writers' alerts)
/// only where the server sees it come in that way, never through a
/// connection pooler. Call it before `wl_pg_protocol_start`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_dialled_port(
    protocol: *mut wl_pg_protocol,
    port: u16,
) -> wl_result {
    run("wl_pg_protocol_dialled_port", || {
        set_dialled(protocol, Some(port))
    })
}

/// Tells the protocol that the program's connection reached the server
/// through a Unix socket (libpq's `PQhost` is a directory); see
/// `wl_pg_protocol_dialled_port`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_dialled_unix(protocol: *mut wl_pg_protocol) -> wl_result {
    run("wl_pg_protocol_dialled_unix", || {
        set_dialled(protocol, None)
    })
}

/// Hands a write the refusal count at which the program's last write on the
/// same database found no refused writer (`wl_pg_write_refusals_clean` of
/// that write). While the count stays, no refused writer can have come since,
/// so the floor check skips its scan of `pg_locks`; when the count moved, the
/// scan runs as a statement of its own (`WL_PG_KIND_ANY_REFUSED`). Without it
/// (the default, or a negative `count` such as the -1 of a write that kept
/// none) every floor check scans, in the same statement. Call it before
/// `wl_pg_protocol_start`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_known_clean(
    protocol: *mut wl_pg_protocol,
    count: i64,
) -> wl_result {
    run("wl_pg_protocol_known_clean", || {
        let protocol = try_mut!(protocol);
        let inner = std::mem::replace(&mut protocol.inner, Protocol::end(false, false));
        // -1 (what wl_pg_write_refusals_clean gives when there is nothing to keep) is no
        // count: the check scans in its own statement, as without this call.
        protocol.inner = inner.known_clean((count >= 0).then_some(count));
        Ok(())
    })
}

/// Checks the `step` out-pointer and sets it to `WL_PG_STEP_NONE` until the
/// protocol moves.
fn step_out(step: *mut wl_pg_step) -> Result<*mut wl_pg_step, wl_error> {
    if step.is_null() {
        return Err(crate::ffi::null_arg("step"));
    }
    put_opt(step, WL_PG_STEP_NONE);
    Ok(step)
}

fn out_of_order(what: &str) -> wl_error {
    wl_error::new(wl_result::WL_STATE, what.to_string())
}

/// Records `next` in the protocol and reports it through `step`.
fn advance(
    protocol: &mut wl_pg_protocol,
    next: Step,
    step: *mut wl_pg_step,
) -> Result<(), wl_error> {
    protocol.pending = None;
    match next {
        Step::Run(statement) => {
            let name = statement.kind().name();
            protocol.pending = Some(Pending {
                sql: c_string(statement.sql()),
                kind: kind_code(name),
                kind_name: c_string(name),
            });
            protocol.phase = Phase::Running;
            put_opt(step, WL_PG_STEP_RUN);
            Ok(())
        }
        Step::Granted(start) => {
            protocol.granted = Some(start);
            protocol.phase = Phase::Finished;
            put_opt(step, WL_PG_STEP_GRANTED);
            Ok(())
        }
        Step::Done => {
            protocol.phase = Phase::Finished;
            put_opt(step, WL_PG_STEP_DONE);
            Ok(())
        }
        Step::Failed(err) => {
            let err = wl_error::from(err);
            protocol.error = Some(err.clone());
            protocol.phase = Phase::Finished;
            put_opt(step, WL_PG_STEP_FAILED);
            Err(err)
        }
    }
}

/// Checks that `protocol` waits for a statement's outcome.
fn running<'a>(protocol: *mut wl_pg_protocol) -> Result<&'a mut wl_pg_protocol, wl_error> {
    let protocol = crate::ffi::deref_mut("protocol", protocol)?;
    match protocol.phase {
        Phase::Running => Ok(protocol),
        Phase::New => Err(out_of_order(
            "the writer protocol has not started; call wl_pg_protocol_start first and feed the \
             outcome of the statement it hands out",
        )),
        Phase::Finished => Err(out_of_order(
            "the writer protocol has finished: it has no statement waiting for an outcome; make a \
             new protocol for the next write",
        )),
    }
}

/// The first step. On `WL_OK`, `*step` is `WL_PG_STEP_RUN` (run
/// `wl_pg_protocol_sql`) or, for a protocol that needs nothing run,
/// `WL_PG_STEP_GRANTED` / `WL_PG_STEP_DONE`. When the protocol fails at once
/// (`WL_PG_TX_OPEN_USED`), `*step` is `WL_PG_STEP_FAILED` and the error's
/// code is returned. Called twice: `WL_STATE`, `*step` `WL_PG_STEP_NONE`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_start(
    protocol: *mut wl_pg_protocol,
    step: *mut wl_pg_step,
) -> wl_result {
    run("wl_pg_protocol_start", || {
        let step = step_out(step)?;
        let protocol = try_mut!(protocol);
        if protocol.phase != Phase::New {
            return Err(out_of_order(
                "the writer protocol was started already; feed the outcome of its statement \
                 with a wl_pg_protocol_feed_ function",
            ));
        }
        let next = protocol.inner.start();
        advance(protocol, next, step)
    })
}

/// Feeds the outcome of a statement that ran: its rows (NULL, or no rows,
/// for a statement without a result, such as `BEGIN`; for a string of
/// several statements, the last one's rows, as `PQexec` returns them).
/// Returns like `wl_pg_protocol_start` with the next step. `WL_STATE` when
/// no statement waits for its outcome (before the start, after the end);
/// the protocol does not move then.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_feed_rows(
    protocol: *mut wl_pg_protocol,
    rows: *const wl_pg_text_rows,
    step: *mut wl_pg_step,
) -> wl_result {
    run("wl_pg_protocol_feed_rows", || {
        let step = step_out(step)?;
        let protocol = running(protocol)?;
        let rows =
            crate::ffi::deref("rows", rows).map_or_else(|_| Vec::new(), |r| r.values().to_vec());
        let next = protocol.inner.feed(Reply::Rows(rows));
        advance(protocol, next, step)
    })
}

/// Feeds the error the server answered a statement with: its `sqlstate`
/// (libpq's `PG_DIAG_SQLSTATE`, such as `55P03`), primary `message`
/// (`PG_DIAG_MESSAGE_PRIMARY`), `detail` and `hint` (NULL when none), and
/// whether it ended the session (`fatal`: severity `FATAL` or `PANIC`).
/// Returns like `wl_pg_protocol_feed_rows`. A cancelled wait for the writer
/// lock (`55P03`) is rolled back and asked again; after the last wait the
/// protocol fails with `WL_PG_NOT_GRANTED`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_feed_error(
    protocol: *mut wl_pg_protocol,
    sqlstate: *const c_char,
    message: *const c_char,
    detail: *const c_char,
    hint: *const c_char,
    fatal: bool,
    step: *mut wl_pg_step,
) -> wl_result {
    run("wl_pg_protocol_feed_error", || {
        let step = step_out(step)?;
        let sqlstate = try_str!(sqlstate);
        let message = try_str!(message);
        let detail = try_opt_str!(detail);
        let hint = try_opt_str!(hint);
        let protocol = running(protocol)?;
        let mut err = ServerError::new(sqlstate, message);
        err.detail = detail.map(str::to_string);
        err.hint = hint.map(str::to_string);
        err.fatal = fatal;
        let next = protocol.inner.feed(Reply::Failed(err));
        advance(protocol, next, step)
    })
}

/// Feeds a statement that got no answer because the connection is gone
/// (libpq's `PQstatus` is `CONNECTION_BAD`), with what the driver said
/// (`reason`, such as `PQerrorMessage`). Returns like
/// `wl_pg_protocol_feed_rows`: `WL_PG_CLOSED`, or `WL_PG_OUTCOME_UNKNOWN`
/// for a `COMMIT`.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_feed_lost(
    protocol: *mut wl_pg_protocol,
    reason: *const c_char,
    step: *mut wl_pg_step,
) -> wl_result {
    run("wl_pg_protocol_feed_lost", || {
        let step = step_out(step)?;
        let reason = try_str!(reason);
        let protocol = running(protocol)?;
        let next = protocol.inner.feed(Reply::Lost {
            reason: reason.trim_end().to_string(),
        });
        advance(protocol, next, step)
    })
}

fn protocol_ref<'a>(protocol: *const wl_pg_protocol) -> Option<&'a wl_pg_protocol> {
    crate::ffi::deref("protocol", protocol).ok()
}

/// The SQL of the statement to run after a `WL_PG_STEP_RUN` step
/// (NUL-terminated, without parameters; it may hold several statements),
/// borrowed from `protocol` until its next step or until it is freed. NULL
/// when no statement waits to run, or for NULL.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_sql(protocol: *const wl_pg_protocol) -> *const c_char {
    value("wl_pg_protocol_sql", std::ptr::null(), || {
        protocol_ref(protocol)
            .and_then(|p| p.pending.as_ref())
            .map_or(std::ptr::null(), |s| s.sql.as_ptr())
    })
}

/// What the statement to run is for (`WL_PG_KIND_*`); `WL_PG_KIND_NONE`
/// when no statement waits to run, or for NULL.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_kind(protocol: *const wl_pg_protocol) -> wl_pg_statement_kind {
    value("wl_pg_protocol_kind", WL_PG_KIND_NONE, || {
        protocol_ref(protocol)
            .and_then(|p| p.pending.as_ref())
            .map_or(WL_PG_KIND_NONE, |s| s.kind)
    })
}

/// The name of the statement's kind (`begin`, `writer_lock`,
/// `floor_check`, `start_write`, `refusal_lock`, `refused_writers`,
/// `setup_limit`, `host_schema`, `schema_check`, `schema`, `store_floor`,
/// `rollback`, `commit`, or a newer one), borrowed like
/// `wl_pg_protocol_sql`; NULL when no statement waits to run.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_kind_name(protocol: *const wl_pg_protocol) -> *const c_char {
    value("wl_pg_protocol_kind_name", std::ptr::null(), || {
        protocol_ref(protocol)
            .and_then(|p| p.pending.as_ref())
            .map_or(std::ptr::null(), |s| s.kind_name.as_ptr())
    })
}

/// Whether the protocol has finished (granted, done or failed; false for
/// NULL).
#[no_mangle]
pub extern "C" fn wl_pg_protocol_finished(protocol: *const wl_pg_protocol) -> bool {
    value("wl_pg_protocol_finished", false, || {
        protocol_ref(protocol).is_some_and(|p| p.phase == Phase::Finished)
    })
}

/// Whether a set-up (`wl_pg_protocol_ensure`, `wl_pg_protocol_setup`)
/// finished with the floor stored and committed: record the database as set
/// up for this process only then (false for NULL).
#[no_mangle]
pub extern "C" fn wl_pg_protocol_set_up(protocol: *const wl_pg_protocol) -> bool {
    value("wl_pg_protocol_set_up", false, || {
        protocol_ref(protocol).is_some_and(|p| p.inner.set_up())
    })
}

/// After `WL_PG_STEP_GRANTED`: what the write learned while it started, as
/// a `wl_pg_write` (the waits, the stored floor, the refused writers still
/// connected, and `wl_pg_write_alerts` for the alerts to raise). On success
/// `*out` is owned by the caller and freed with `wl_pg_write_free`;
/// `WL_STATE` when the protocol was not granted.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_granted(
    protocol: *const wl_pg_protocol,
    out: *mut *mut wl_pg_write,
) -> wl_result {
    run("wl_pg_protocol_granted", || {
        let out = try_out!(out);
        let protocol = crate::ffi::deref("protocol", protocol)?;
        let Some(start) = &protocol.granted else {
            return Err(out_of_order(
                "the writer protocol was not granted a write; wl_pg_protocol_granted answers \
                 only after a WL_PG_STEP_GRANTED step",
            ));
        };
        put(
            out,
            Box::into_raw(Box::new(wl_pg_write::new(start.clone()))),
        );
        Ok(())
    })
}

/// After `WL_PG_STEP_FAILED`: a copy of the error (code, message,
/// SQLSTATE, refused version and floor), owned by the caller and freed with
/// `wl_error_free`. NULL when the protocol did not fail, or for NULL.
#[no_mangle]
pub extern "C" fn wl_pg_protocol_error(protocol: *const wl_pg_protocol) -> *mut wl_error {
    value("wl_pg_protocol_error", std::ptr::null_mut(), || {
        protocol_ref(protocol)
            .and_then(|p| p.error.clone())
            .map_or(std::ptr::null_mut(), |e| Box::into_raw(Box::new(e)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_numbers_are_stable_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for (i, (name, code)) in KINDS.iter().enumerate() {
            assert_eq!(*code as usize, i + 1, "{name}");
            assert_eq!(kind_code(name), *code);
            assert!(seen.insert(*code));
        }
        assert_eq!(kind_code("a_kind_from_a_newer_core"), WL_PG_KIND_OTHER);
    }

    /// Drives `p`, answering each statement by its kind's name (`check` for the floor check,
    /// a current and writable schema, no rows otherwise); returns the names it handed out.
    fn names_of(mut p: Protocol, check: &[&str]) -> Vec<&'static str> {
        use writerlock::pg::Value;
        let mut names = Vec::new();
        let mut step = p.start();
        while let Step::Run(statement) = &step {
            let name = statement.kind().name();
            names.push(name);
            let text = |cells: &[&str]| vec![cells.iter().map(|c| Value::from(*c)).collect()];
            let rows = match name {
                "floor_check" | "start_write" => text(check),
                "schema_check" => text(&["f", "f"]),
                "any_refused" => text(&["f"]),
                _ => Vec::new(),
            };
            step = p.feed(Reply::Rows(rows));
        }
        names
    }

    /// Every kind numbered here is one the core hands out under that name, so a renamed
    /// kind cannot silently become `WL_PG_KIND_OTHER`.
    #[test]
    fn every_numbered_kind_is_one_the_core_hands_out() {
        use writerlock::pg::Settings;
        let s = Settings::new();
        let mut seen = std::collections::HashSet::new();
        for (protocol, check) in [
            (Protocol::write(&s, TxState::Idle), &["1", "1", "t"][..]),
            (Protocol::write(&s, TxState::Idle), &["2", "1", "f"]),
            (
                Protocol::write_in_one_message(&s, TxState::Idle),
                &["1", "1", "f"],
            ),
            (
                Protocol::setup(&s, Some("SELECT 1"), TxState::Idle),
                &["1", "1", "f"],
            ),
            (Protocol::ensure(&s, TxState::Idle), &["1", "1", "f"]),
            (Protocol::end(true, false), &["1", "1", "f"]),
            // A known clean count the floor check no longer reads: the scan runs alone.
            (
                Protocol::write(&s, TxState::Idle).known_clean(Some(5)),
                &["1", "1", "", "6"],
            ),
        ] {
            seen.extend(names_of(protocol, check));
        }
        for (name, _) in KINDS {
            assert!(
                seen.contains(name),
                "the core no longer hands out a {name} statement"
            );
        }
    }
}
