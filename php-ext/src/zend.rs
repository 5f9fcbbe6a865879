//! The few Zend engine entry points this extension needs beyond what
//! ext-php-rs binds. All of them are exported by the PHP binary (`ZEND_API`
//! or `PHPAPI`), so the dynamic linker resolves them when PHP loads the
//! extension.

use std::ffi::{c_char, c_int};

use std::sync::atomic::{AtomicBool, Ordering};

use ext_php_rs::ffi::{zend_class_entry, zend_execute_data, zend_object, zval};
use ext_php_rs::types::{ZendObject, Zval};
use ext_php_rs::zend::ClassEntry;

/// `zend_error_handling`: the engine's error mode, saved and restored around
/// calls that must not print warnings.
#[repr(C)]
struct ErrorHandling {
    handling: c_int,
    exception: *mut zend_class_entry,
}

/// `EH_THROW`: warnings become exceptions of `EG(exception_class)`, without
/// reaching the user's error handler, the log or the output.
const EH_THROW: c_int = 1;

extern "C" {
    static mut spl_ce_RuntimeException: *mut zend_class_entry;

    fn zend_replace_error_handling(
        handling: c_int,
        exception_class: *mut zend_class_entry,
        current: *mut ErrorHandling,
    );
    fn zend_restore_error_handling(saved: *mut ErrorHandling);

    fn zend_update_property(
        scope: *mut zend_class_entry,
        object: *mut zend_object,
        name: *const c_char,
        name_length: usize,
        value: *mut zval,
    );
}

/// PHP's `\RuntimeException`, registered by SPL before any shared extension
/// starts.
///
/// # Panics
/// If SPL has not registered it (impossible once PHP runs extensions).
pub(crate) fn runtime_exception() -> &'static ClassEntry {
    // SAFETY: SPL sets the pointer at its startup, before shared extensions
    // start, and never changes it afterwards.
    let ce = unsafe { *std::ptr::addr_of!(spl_ce_RuntimeException) };
    // SAFETY: a non-null class entry pointer of a registered internal class
    // lives as long as the process.
    unsafe { ce.as_ref() }.expect("SPL registered \\RuntimeException before this extension started")
}

/// Runs `f` with PHP warnings turned into (pending) `ErrorException`s instead
/// of being printed, logged or passed to a user error handler; the caller
/// takes the pending exception afterwards.
pub(crate) fn without_warnings<T>(f: impl FnOnce() -> T) -> T {
    let mut saved = ErrorHandling {
        handling: 0,
        exception: std::ptr::null_mut(),
    };
    let class = std::ptr::from_ref(ext_php_rs::zend::ce::error_exception()).cast_mut();
    // SAFETY: plain stores into the executor globals; restored below.
    unsafe { zend_replace_error_handling(EH_THROW, class, &mut saved) };
    let result = f();
    // SAFETY: `saved` was filled by zend_replace_error_handling above.
    unsafe { zend_restore_error_handling(&mut saved) };
    result
}

/// Writes a property of `object` as code of class `scope` would, so private
/// and protected properties declared by `scope` are reachable.
pub(crate) fn update_property(
    scope: &ClassEntry,
    object: &mut ZendObject,
    name: &str,
    value: &mut Zval,
) {
    // SAFETY: valid class entry and object; the name is passed with its
    // length (no NUL needed); the engine copies the value.
    unsafe {
        zend_update_property(
            std::ptr::from_ref(scope).cast_mut(),
            std::ptr::from_mut(object),
            name.as_ptr().cast(),
            name.len(),
            std::ptr::from_mut(value),
        );
    }
}

/// Reads a property of `object` as code of class `scope` would, without a
/// notice when it is missing, and hands it to `read`.
pub(crate) fn read_property<T>(
    scope: &ClassEntry,
    object: &ZendObject,
    name: &str,
    read: impl FnOnce(&Zval) -> T,
) -> Option<T> {
    let mut rv = Zval::new();
    // SAFETY: valid class entry and object; `silent` set; `rv` outlives the
    // returned pointer's use below.
    let found = unsafe {
        ext_php_rs::ffi::zend_read_property(
            std::ptr::from_ref(scope).cast_mut(),
            std::ptr::from_ref(object).cast_mut(),
            name.as_ptr().cast(),
            name.len(),
            true,
            std::ptr::from_mut(&mut rv),
        )
    };
    // SAFETY: the engine returns a pointer to the property or to `rv`.
    unsafe { found.as_ref() }.map(|value| read(value.dereference()))
}

/// Whether PHP's VM has been asked to stop at its next instruction (a
/// pending pcntl signal, or the execution timer).
pub(crate) fn vm_interrupt() -> bool {
    // SAFETY: a plain read of a flag in the executor globals, which live as
    // long as the process; signal handlers write it, so read it volatile.
    unsafe {
        std::ptr::read_volatile(std::ptr::addr_of!(
            ext_php_rs::ffi::executor_globals.vm_interrupt.value
        ))
    }
}

/// Whether PHP's execution timer has fired.
pub(crate) fn timed_out() -> bool {
    // SAFETY: as in `vm_interrupt`.
    unsafe {
        std::ptr::read_volatile(std::ptr::addr_of!(
            ext_php_rs::ffi::executor_globals.timed_out.value
        ))
    }
}

fn set_vm_interrupt(value: bool) {
    // SAFETY: a plain store into the executor globals, as the VM and pcntl's
    // signal handler make it.
    unsafe {
        std::ptr::write_volatile(
            std::ptr::addr_of_mut!(ext_php_rs::ffi::executor_globals.vm_interrupt.value),
            value,
        );
    }
}

/// Clears the VM's interrupt flag once its cause has been dealt with (the
/// caller ran the signal handlers).
pub(crate) fn clear_vm_interrupt() {
    set_vm_interrupt(false);
}

/// Set by [`defer_interrupt`] when the VM was interrupted during a call made
/// through [`without_signal_handlers`].
static DEFERRED: AtomicBool = AtomicBool::new(false);

/// Stands in for `zend_interrupt_function` (pcntl's signal dispatch) during a
/// connection call: notes the interrupt, runs no PHP handler.
unsafe extern "C" fn defer_interrupt(_execute_data: *mut zend_execute_data) {
    DEFERRED.store(true, Ordering::Relaxed);
}

/// Runs `f` (a call into a connection's PHP methods) so that PHP runs no
/// signal handler inside it: `zend_call_function()` and the VM run pending
/// pcntl handlers through `zend_interrupt_function`, and an exception a
/// handler threw there would be taken for the connection's failure. During
/// `f` that hook only notes the interrupt (signals are still delivered, and
/// a signal without a PHP handler still ends the process); afterwards the
/// VM's interrupt flag is raised again, so the VM, or the wait's check,
/// runs the handlers next.
pub(crate) fn without_signal_handlers<T>(f: impl FnOnce() -> T) -> T {
    let pending = vm_interrupt();
    if pending {
        set_vm_interrupt(false);
    }
    let outer = DEFERRED.swap(false, Ordering::Relaxed);
    // SAFETY: the engine reads this hook only on the thread running PHP,
    // which is this one, and it is put back below before PHP runs on.
    let saved = unsafe {
        (*std::ptr::addr_of_mut!(ext_php_rs::ffi::zend_interrupt_function)).replace(defer_interrupt)
    };
    let result = f();
    // SAFETY: as above.
    unsafe {
        *std::ptr::addr_of_mut!(ext_php_rs::ffi::zend_interrupt_function) = saved;
    }
    let deferred = DEFERRED.swap(outer, Ordering::Relaxed);
    if pending || deferred || outer {
        set_vm_interrupt(true);
    }
    result
}
