//! The `sqlite3*` behind PHP's `\SQLite3` and `PDO` (sqlite driver) objects.
//!
//! The queue drives a connection through its own handle where it can: SQLite's
//! C API on the connection PHP opened (`sqlite3_busy_timeout`,
//! `sqlite3_get_autocommit`, `sqlite3_db_filename`, the queue's `BEGIN
//! IMMEDIATE`, `COMMIT`, `ROLLBACK` and `PRAGMA busy_timeout` prepared on the
//! handle by the core's [`writerlock::SqliteHandle`]), so none of the queue's
//! own statements passes through `SQLite3::exec()`/`query()` or `PDO::exec()`
//! (or a subclass overriding them), and each turn costs no PHP-level call.
//!
//! The handle is read from PHP's object structs (PHP 8.2's layouts, the ones
//! this extension is built against):
//!
//! * `\SQLite3`: `php_sqlite3_db_object { int initialised; sqlite3 *db; …;
//!   zend_object zo; }`, found from the object with `handlers->offset`;
//! * `PDO`: `pdo_dbh_object_t { pdo_dbh_t *inner; zend_object std; }`, with
//!   `inner->driver->driver_name` `"sqlite"` and `inner->driver_data` a
//!   `pdo_sqlite_db_handle { sqlite3 *db; … }`.
//!
//! It is used only when the PHP module that opened the connection (`sqlite3.so`,
//! `pdo_sqlite.so`) calls the same `libsqlite3` as this extension
//! ([`writerlock::sqlite::shares_this_sqlite`]: a handle of one copy of SQLite
//! must never reach another), and the first connection of each kind must
//! answer sanely on its handle.
//! Otherwise the queue keeps driving the object through its PHP methods, and
//! says so once per process (an `E_NOTICE`).
//!
//! The statements the core prepares live for one call of the extension only:
//! PHP closes its connections with `sqlite3_close()`, which refuses to close
//! (and would leave the database open) while a statement stays prepared.

use std::ffi::{c_char, c_int, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};

use ext_php_rs::error::php_error;
use ext_php_rs::flags::ErrorType;
use ext_php_rs::types::ZendObject;
use ext_php_rs::zend::ClassEntry;
use libsqlite3_sys as ffi;
use writerlock::sqlite::shares_this_sqlite;

use crate::session::ConnKind;

/// Whether a kind of connection may be driven through its handle: not yet known.
const UNKNOWN: u8 = 0;
/// The module shares this process's SQLite and the layout was confirmed.
const USABLE: u8 = 1;
/// The module's SQLite or layout is not the one expected: PHP methods only.
const UNUSABLE: u8 = 2;
/// The module shares this process's SQLite; the layout is confirmed at the
/// first open connection.
const LIBRARY_OK: u8 = 3;

static SQLITE3: AtomicU8 = AtomicU8::new(UNKNOWN);
static PDO: AtomicU8 = AtomicU8::new(UNKNOWN);

/// PHP 8.2's module API number: the layouts below are PHP 8.2's.
const PHP_8_2_API: u32 = 20220829;
/// `offsetof(pdo_dbh_t, driver_data)` in PHP 8.2.
const PDO_DRIVER_DATA: usize = 8;
/// `offsetof(pdo_dbh_t, driver)` in PHP 8.2.
const PDO_DRIVER: usize = 120;
/// `offsetof(pdo_dbh_object_t, std)`.
const PDO_OBJECT_STD: i32 = 8;
/// `offsetof(php_sqlite3_db_object, db)`.
const SQLITE3_DB: usize = 8;

/// What an object's struct says of its connection.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Found {
    /// An open connection's handle.
    Open(*mut ffi::sqlite3),
    /// Closed (`SQLite3::close()`), or a PDO whose constructor did not run.
    Closed,
    /// The layout is not one this extension knows: use the PHP methods.
    Unknown,
}

fn trust(kind: ConnKind) -> &'static AtomicU8 {
    match kind {
        ConnKind::Sqlite3 => &SQLITE3,
        ConnKind::Pdo => &PDO,
    }
}

/// The start of the struct that embeds `object` (`handlers->offset` bytes before it).
fn struct_start(object: &ZendObject) -> Option<*const u8> {
    // SAFETY: a live object always has its handlers.
    let handlers = unsafe { object.handlers.as_ref() }?;
    let offset = usize::try_from(handlers.offset).ok()?;
    if offset % std::mem::align_of::<usize>() != 0 {
        return None;
    }
    Some(std::ptr::from_ref(object).cast::<u8>().wrapping_sub(offset))
}

/// Reads a pointer at `base + offset`, `None` when `base` is null.
///
/// # Safety
/// `base + offset` must be readable as a pointer.
unsafe fn read_ptr<T>(base: *const u8, offset: usize) -> Option<*const T> {
    if base.is_null() {
        return None;
    }
    let p = base.add(offset).cast::<*const T>().read();
    (!p.is_null()).then_some(p)
}

/// The shared object `address` belongs to, where the dynamic linker knows it.
fn object_file(address: *const std::ffi::c_void) -> Option<PathBuf> {
    // SAFETY: dladdr only looks the address up; the name it gives is the
    // loaded object's, valid while it stays loaded (it is copied at once).
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(address, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let name = CStr::from_ptr(info.dli_fname).to_bytes();
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(name)))
    }
}

/// The `SQLite3` handle of `object` (already checked to be an instance of `\SQLite3`).
fn sqlite3_handle(object: &ZendObject) -> Found {
    let Some(start) = struct_start(object) else {
        return Found::Unknown;
    };
    // SAFETY: checked above.
    let offset = unsafe { (*object.handlers).offset };
    if usize::try_from(offset).unwrap_or(0) < SQLITE3_DB + std::mem::size_of::<usize>() {
        return Found::Unknown;
    }
    // SAFETY: `object` is the `zo` of a php_sqlite3_db_object (an instance of
    // SQLite3, whose create_object every subclass inherits), which starts with
    // `int initialised` and has `sqlite3 *db` at SQLITE3_DB.
    unsafe {
        if start.cast::<c_int>().read() == 0 {
            return Found::Closed;
        }
        match read_ptr::<ffi::sqlite3>(start, SQLITE3_DB) {
            Some(db) => Found::Open(db.cast_mut()),
            None => Found::Closed,
        }
    }
}

/// The PDO driver struct (`pdo_driver_t`) of `object` (an instance of `PDO`), if connected.
fn pdo_driver(object: &ZendObject) -> Result<Option<(*const u8, *const u8)>, ()> {
    let Some(start) = struct_start(object) else {
        return Err(());
    };
    // SAFETY: checked by struct_start.
    if unsafe { (*object.handlers).offset } != PDO_OBJECT_STD {
        return Err(());
    }
    // SAFETY: `object` is the `std` of a pdo_dbh_object_t (PDO's create_object,
    // inherited by every subclass): `inner` first, a pdo_dbh_t with its driver
    // at PDO_DRIVER.
    unsafe {
        let Some(inner) = read_ptr::<u8>(start, 0) else {
            return Err(());
        };
        Ok(read_ptr::<u8>(inner, PDO_DRIVER).map(|driver| (inner, driver)))
    }
}

/// The name of the PDO driver of `object` (`None`: not connected), read from
/// its struct where PDO's layout is the one known here; `Err` otherwise.
pub(crate) fn pdo_driver_name(object: &ZendObject) -> Result<Option<&'static CStr>, ()> {
    if PDO.load(Ordering::Relaxed) == UNUSABLE {
        return Err(());
    }
    let Some((_, driver)) = pdo_driver(object)? else {
        return Ok(None);
    };
    // SAFETY: pdo_driver_t starts with `const char *driver_name`, a static
    // string of the driver's module.
    unsafe {
        let Some(name) = read_ptr::<c_char>(driver, 0) else {
            return Err(());
        };
        Ok(Some(CStr::from_ptr(name)))
    }
}

/// The handle of a PDO sqlite connection (`object` checked to be a PDO of the sqlite driver).
fn pdo_handle(object: &ZendObject) -> Found {
    match pdo_driver(object) {
        Err(()) => Found::Unknown,
        Ok(None) => Found::Closed,
        Ok(Some((inner, _))) => {
            // SAFETY: the sqlite driver's driver_data is a pdo_sqlite_db_handle,
            // which starts with `sqlite3 *db`.
            unsafe {
                match read_ptr::<u8>(inner, PDO_DRIVER_DATA)
                    .and_then(|data| read_ptr::<ffi::sqlite3>(data, 0))
                {
                    Some(db) => Found::Open(db.cast_mut()),
                    None => Found::Closed,
                }
            }
        }
    }
}

/// Whether the module that made connections of `kind` calls this process's
/// `libsqlite3` (found from `object`, a connection of that kind).
fn library_shared(object: &ZendObject, kind: ConnKind) -> bool {
    let address: *const std::ffi::c_void = match kind {
        ConnKind::Sqlite3 => {
            let Some(ce) = ClassEntry::try_find("SQLite3") else {
                return false;
            };
            // ZEND_INTERNAL_CLASS: `info.internal.module` is the module that registered it.
            if ce.type_ != 1 {
                return false;
            }
            // SAFETY: an internal class's info is the `internal` member.
            unsafe { ce.info.internal.module.cast_const().cast() }
        }
        ConnKind::Pdo => match pdo_driver(object) {
            Ok(Some((_, driver))) => driver.cast(),
            _ => return false,
        },
    };
    if address.is_null() {
        return false;
    }
    object_file(address).is_some_and(|file| shares_this_sqlite(&file))
}

/// The handle of `object`, a connection of `kind`, where the queue may drive it.
///
/// The first open connection of each kind must answer sanely on its handle
/// (`sqlite3_db_filename` names a file, `sqlite3_get_autocommit` says 0 or 1),
/// or that kind is driven through its PHP methods from then on.
pub(crate) fn handle(object: &ZendObject, kind: ConnKind) -> Found {
    let state = trust(kind);
    let known = state.load(Ordering::Acquire);
    if known == UNUSABLE {
        return Found::Unknown;
    }
    if known == UNKNOWN {
        if ext_php_rs::ffi::ZEND_MODULE_API_NO != PHP_8_2_API {
            give_up(
                kind,
                "belongs to a PHP version whose structs this extension does not know",
            );
            return Found::Unknown;
        }
        if !library_shared(object, kind) {
            give_up(kind, "does not call the libsqlite3 this extension uses");
            return Found::Unknown;
        }
        state.store(LIBRARY_OK, Ordering::Release);
    }
    let found = match kind {
        ConnKind::Sqlite3 => sqlite3_handle(object),
        ConnKind::Pdo => pdo_handle(object),
    };
    if known == USABLE {
        return found;
    }
    let Found::Open(db) = found else {
        return found;
    };
    // SAFETY: the handle of an open connection of this process's libsqlite3;
    // the name stays valid while the connection is open.
    let sane = unsafe {
        !ffi::sqlite3_db_filename(db, c"main".as_ptr()).is_null()
            && matches!(ffi::sqlite3_get_autocommit(db), 0 | 1)
    };
    if sane {
        state.store(USABLE, Ordering::Release);
        found
    } else {
        give_up(
            kind,
            "keeps its connection in a way this extension does not recognise",
        );
        Found::Unknown
    }
}

/// Marks `kind` as driven through PHP's methods from now on, and says so once.
fn give_up(kind: ConnKind, why: &str) {
    if trust(kind).swap(UNUSABLE, Ordering::AcqRel) != UNUSABLE {
        let module = match kind {
            ConnKind::Sqlite3 => "sqlite3 extension (SQLite3)",
            ConnKind::Pdo => "pdo_sqlite extension (PDO)",
        };
        php_error(
            &ErrorType::Notice,
            &format!(
                "writerlock: PHP's {module} {why}, so the writer queue runs its statements through \
                 the connection's PHP methods (slower; a subclass overriding exec() sees them, and a \
                 transaction the script ends with its own COMMIT keeps the writer turn until the next \
                 begin())"
            ),
        );
    }
}
