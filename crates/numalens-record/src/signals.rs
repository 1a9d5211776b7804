//! The recorder survives the signals meant for the program and passes on the ones sent to it.
//!
//! Ctrl-C from a terminal reaches the whole foreground process group, the program included, so the
//! recorder only notes it (and keeps recording until the program is gone); a signal sent to the
//! recorder alone by another process (`kill`) is forwarded to the program.

use std::sync::atomic::{AtomicI32, Ordering};

static PENDING_FORWARD: AtomicI32 = AtomicI32::new(0);
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let code = unsafe { (*info).si_code };
    INTERRUPTED.store(signal, Ordering::SeqCst);
    if code == libc::SI_USER || code == libc::SI_QUEUE {
        PENDING_FORWARD.store(signal, Ordering::SeqCst);
    }
}

/// Installs the handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT. Handlers (unlike ignored
/// dispositions) are reset by exec, so the program starts with the default ones.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Forwards a signal sent to the recorder to `pid`, if one arrived.
pub fn forward_pending(pid: u32) {
    let signal = PENDING_FORWARD.swap(0, Ordering::SeqCst);
    if signal != 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid as libc::pid_t, signal) };
    }
}

/// The last signal the recorder received, if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
