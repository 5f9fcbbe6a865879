//! The exception classes: `WriterLock\Exception` (a `\RuntimeException`),
//! and below it `WriterLock\BusyException` and `WriterLock\StartException`.
//!
//! They are ordinary PHP exceptions: the engine's own exception constructor
//! creates them, so they carry the file, line and trace of the PHP call that
//! failed, and PHP code may construct, extend and catch them like any other.
//! That is why they are registered with a [`ClassBuilder`] rather than as
//! Rust-backed `#[php_class]` objects. A busy exception keeps its details in
//! private properties that its accessor methods read.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use ext_php_rs::builders::{ClassBuilder, ClassProperty, FunctionBuilder};
use ext_php_rs::convert::IntoZval;
use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::{DataType, MethodFlags, PropertyFlags};
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::{ClassEntry, ExecuteData};

use crate::zend;

/// PHP name of the base class of every exception the extension throws.
pub const BASE_CLASS: &str = "WriterLock\\Exception";
/// PHP name of the exception for a wait that ran out.
pub const BUSY_CLASS: &str = "WriterLock\\BusyException";
/// PHP name of the exception for a transaction that could not start.
pub const START_CLASS: &str = "WriterLock\\StartException";

static BASE: AtomicPtr<ClassEntry> = AtomicPtr::new(std::ptr::null_mut());
static BUSY: AtomicPtr<ClassEntry> = AtomicPtr::new(std::ptr::null_mut());
static START: AtomicPtr<ClassEntry> = AtomicPtr::new(std::ptr::null_mut());

pub use crate::kinds::Kind;

impl Kind {
    fn slot(self) -> &'static AtomicPtr<ClassEntry> {
        match self {
            Kind::Base => &BASE,
            Kind::Busy => &BUSY,
            Kind::Start => &START,
        }
    }

    /// The registered class entry (`None` before module startup).
    pub fn class_entry(self) -> Option<&'static ClassEntry> {
        // SAFETY: set once at module startup to a class entry the engine keeps
        // for the life of the process.
        unsafe { self.slot().load(Ordering::Acquire).as_ref() }
    }
}

fn base_entry() -> &'static ClassEntry {
    Kind::Base
        .class_entry()
        .unwrap_or_else(zend::runtime_exception)
}

/// Property names of `WriterLock\BusyException` (private).
const WAITED: &str = "waited";
const LIMIT: &str = "limit";
const SETTING: &str = "setting";
const HOLDER_PID: &str = "holderPid";

fn null_property(name: &str) -> ClassProperty {
    ClassProperty {
        name: name.to_string(),
        flags: PropertyFlags::Private,
        default: Some(Box::new(|| {
            let mut zv = Zval::new();
            zv.set_null();
            Ok(zv)
        })),
        docs: &[],
        ty: None,
        nullable: true,
        readonly: false,
        default_stub: Some("null".into()),
    }
}

/// Registers the three classes. Runs in module startup (MINIT).
pub fn register() -> ext_php_rs::error::Result<()> {
    ClassBuilder::new(BASE_CLASS)
        .extends((zend::runtime_exception, "\\RuntimeException"))
        .registration(|ce, arg_info| {
            BASE.store(ce, Ordering::Release);
            // The engine points at these tables for the life of the process.
            std::mem::forget(arg_info);
        })
        .register()?;

    let busy_methods = [
        (
            "waited",
            busy_waited as FunctionHandlerFn,
            DataType::Double,
            false,
        ),
        ("limit", busy_limit, DataType::Double, false),
        ("setting", busy_setting, DataType::String, false),
        ("holderPid", busy_holder_pid, DataType::Long, true),
    ];
    let mut busy = ClassBuilder::new(BUSY_CLASS).extends((base_entry, "\\WriterLock\\Exception"));
    for (name, handler, returns, nullable) in busy_methods {
        busy = busy.method(
            FunctionBuilder::new(name, handler).returns(returns, false, nullable),
            MethodFlags::Public,
        );
    }
    for name in [WAITED, LIMIT, SETTING, HOLDER_PID] {
        busy = busy.property(null_property(name));
    }
    busy.registration(|ce, arg_info| {
        BUSY.store(ce, Ordering::Release);
        // The engine points at these tables for the life of the process.
        std::mem::forget(arg_info);
    })
    .register()?;

    ClassBuilder::new(START_CLASS)
        .extends((base_entry, "\\WriterLock\\Exception"))
        .registration(|ce, arg_info| {
            START.store(ce, Ordering::Release);
            std::mem::forget(arg_info);
        })
        .register()?;
    Ok(())
}

type FunctionHandlerFn = extern "C" fn(&mut ExecuteData, &mut Zval);

/// Reads one of the busy exception's private properties from `$this`.
fn busy_property<T>(ex: &mut ExecuteData, name: &str, read: impl FnOnce(&Zval) -> T) -> Option<T> {
    let scope = Kind::Busy.class_entry()?;
    let this: &ZendObject = ex.get_self()?;
    zend::read_property(scope, this, name, read)
}

fn number(zv: &Zval) -> f64 {
    zv.double()
        .or_else(|| zv.long().map(|l| l as f64))
        .unwrap_or(0.0)
}

extern "C" fn busy_waited(ex: &mut ExecuteData, retval: &mut Zval) {
    ext_php_rs::zend::run_handler(AssertUnwindSafe(|| {
        let value = busy_property(ex, WAITED, number).unwrap_or(0.0);
        retval.set_double(value);
    }));
}

extern "C" fn busy_limit(ex: &mut ExecuteData, retval: &mut Zval) {
    ext_php_rs::zend::run_handler(AssertUnwindSafe(|| {
        let value = busy_property(ex, LIMIT, number).unwrap_or(0.0);
        retval.set_double(value);
    }));
}

extern "C" fn busy_setting(ex: &mut ExecuteData, retval: &mut Zval) {
    ext_php_rs::zend::run_handler(AssertUnwindSafe(|| {
        let value =
            busy_property(ex, SETTING, |zv| zv.string().unwrap_or_default()).unwrap_or_default();
        if retval.set_string(&value, false).is_err() {
            retval.set_null();
        }
    }));
}

extern "C" fn busy_holder_pid(ex: &mut ExecuteData, retval: &mut Zval) {
    ext_php_rs::zend::run_handler(AssertUnwindSafe(|| {
        match busy_property(ex, HOLDER_PID, |zv| zv.long()).flatten() {
            Some(pid) => retval.set_long(pid),
            None => retval.set_null(),
        }
    }));
}

/// Makes an exception object of `kind` with `message` and `code`, through
/// the engine's constructor (file, line and trace of the current PHP call).
fn new_exception(kind: Kind, message: &str, code: i64) -> Result<ZendObjectBox, PhpException> {
    let ce = kind
        .class_entry()
        .ok_or_else(|| PhpException::from_message(message.to_string()))?;
    let object = ZendObject::new(ce);
    object
        .try_call_method("__construct", vec![&message.to_string(), &code])
        .map_err(|_| PhpException::new(message.to_string(), 0, ce))?;
    Ok(ZendObjectBox { ce, object })
}

struct ZendObjectBox {
    ce: &'static ClassEntry,
    object: ext_php_rs::boxed::ZBox<ZendObject>,
}

impl ZendObjectBox {
    fn into_exception(self, message: &str) -> PhpException {
        let ce = self.ce;
        match self.object.into_zval(false) {
            Ok(zv) => PhpException::new(message.to_string(), 0, ce).with_object(zv),
            Err(_) => PhpException::new(message.to_string(), 0, ce),
        }
    }
}

/// The details of a busy exception.
pub struct BusyDetails<'a> {
    /// The message (the driver's exact text).
    pub message: &'a str,
    /// How long the writer waited.
    pub waited: Duration,
    /// Its limit.
    pub limit: Duration,
    /// The setting named in the message.
    pub setting: &'a str,
    /// The holder of the writer lock, where known.
    pub holder_pid: Option<u32>,
}

/// A `WriterLock\BusyException` to throw.
pub fn busy(details: &BusyDetails<'_>) -> PhpException {
    let mut made = match new_exception(Kind::Busy, details.message, 5) {
        Ok(made) => made,
        Err(e) => return e,
    };
    let ce = made.ce;
    let mut waited = Zval::new();
    waited.set_double(details.waited.as_secs_f64());
    zend::update_property(ce, &mut made.object, WAITED, &mut waited);
    let mut limit = Zval::new();
    limit.set_double(details.limit.as_secs_f64());
    zend::update_property(ce, &mut made.object, LIMIT, &mut limit);
    let mut setting = Zval::new();
    if setting.set_string(details.setting, false).is_err() {
        setting.set_null();
    }
    zend::update_property(ce, &mut made.object, SETTING, &mut setting);
    let mut holder = Zval::new();
    match details.holder_pid {
        Some(pid) => holder.set_long(i64::from(pid)),
        None => holder.set_null(),
    }
    zend::update_property(ce, &mut made.object, HOLDER_PID, &mut holder);
    made.into_exception(details.message)
}

/// A `WriterLock\StartException` or `WriterLock\Exception` to throw.
pub fn plain(kind: Kind, message: &str, code: i64) -> PhpException {
    match new_exception(kind, message, code) {
        Ok(made) => made.into_exception(message),
        Err(e) => e,
    }
}
