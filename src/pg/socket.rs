//! A session's own socket, found among the process's file descriptors, and a check that
//! costs no round trip: whether the server already ended an idle session.
//!
//! The driver does not hand out its socket, so after connecting the session looks for it in
//! `/proc/self/fd`: over TCP the one socket whose local port is the client port the server
//! reports (`inet_client_port()`) and whose peer port is the server's; over a Unix socket
//! the one socket connected to the server's socket file that no other session of this
//! process has claimed. When that is not one socket (a pooler in between, another library
//! connected to the same socket file at the same moment) the session simply has none, and
//! callers fall back to a round trip.
//!
//! An idle session's socket has nothing to read: the server speaks only when asked. A
//! readable socket (or one at end of file, or in error) on an idle session therefore means
//! the server sent its termination notice (`57P01` after a restart or
//! `pg_terminate_backend`) or closed the connection; [`SessionSocket::readable`] asks
//! `poll(2)` with a zero timeout.

use std::os::fd::RawFd;
use std::sync::Mutex;

/// A session's socket: its descriptor and the inode it had when found, so a descriptor that
/// was closed and reused for something else is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionSocket {
    fd: RawFd,
    inode: u64,
}

/// Sockets claimed by this process's sessions (a handful; a `Vec` as in `floor::SET_UP`).
static CLAIMED: Mutex<Vec<SessionSocket>> = Mutex::new(Vec::new());

fn claimed() -> std::sync::MutexGuard<'static, Vec<SessionSocket>> {
    CLAIMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where the session's socket is connected to.
pub(crate) enum Peer {
    /// TCP: the session's local port (as the server saw it) and the server's port.
    Tcp { local: u16, server: u16 },
    /// A Unix socket: the server's socket files the address may have used.
    Unix { paths: Vec<String> },
}

fn inode_of(fd: RawFd) -> Option<u64> {
    // SAFETY: fstat writes into a zeroed stat buffer we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    ((st.st_mode & libc::S_IFMT) == libc::S_IFSOCK).then_some(st.st_ino)
}

/// The address at one end of `fd` (`peer`: the far end), as the port of an IP socket or
/// the path of a Unix socket.
enum End {
    Port(u16),
    Path(String),
    Other,
}

fn end_of(fd: RawFd, peer: bool) -> End {
    // SAFETY: the buffer is a zeroed sockaddr_storage with its length; the kernel writes at
    // most that many bytes.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let ptr = (&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
    let rc = unsafe {
        if peer {
            libc::getpeername(fd, ptr, &mut len)
        } else {
            libc::getsockname(fd, ptr, &mut len)
        }
    };
    if rc != 0 {
        return End::Other;
    }
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ptr.cast::<libc::sockaddr_in>()) };
            End::Port(u16::from_be(sin.sin_port))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ptr.cast::<libc::sockaddr_in6>()) };
            End::Port(u16::from_be(sin6.sin6_port))
        }
        libc::AF_UNIX => {
            // SAFETY: the family says the storage holds a sockaddr_un.
            let sun = unsafe { &*(ptr.cast::<libc::sockaddr_un>()) };
            let bytes: Vec<u8> = sun
                .sun_path
                .iter()
                .take_while(|c| **c != 0)
                .map(|c| *c as u8)
                .collect();
            End::Path(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => End::Other,
    }
}

impl SessionSocket {
    /// Finds and claims the socket connected to `peer`; `None` unless exactly one fits.
    pub(crate) fn find(peer: &Peer) -> Option<SessionSocket> {
        let entries = std::fs::read_dir("/proc/self/fd").ok()?;
        let mut claimed = claimed();
        let mut found = None;
        for entry in entries.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RawFd>().ok())
            else {
                continue;
            };
            let Some(inode) = inode_of(fd) else { continue };
            let socket = SessionSocket { fd, inode };
            let fits = match peer {
                Peer::Tcp { local, server } => {
                    matches!(end_of(fd, false), End::Port(p) if p == *local)
                        && matches!(end_of(fd, true), End::Port(p) if p == *server)
                }
                Peer::Unix { paths } => {
                    !claimed.contains(&socket)
                        && matches!(end_of(fd, true), End::Path(p) if paths.contains(&p))
                }
            };
            if fits {
                if found.is_some() {
                    return None;
                }
                found = Some(socket);
            }
        }
        let found = found?;
        claimed.retain(|s| s.fd != found.fd);
        claimed.push(found);
        Some(found)
    }

    /// Whether the socket has something to read, is at end of file or in error: on an idle
    /// session, the server ended it. False when the descriptor is no longer this socket.
    pub(crate) fn readable(&self) -> bool {
        if inode_of(self.fd) != Some(self.inode) {
            return false;
        }
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one pollfd we own, zero timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n > 0 && pfd.revents != 0
    }

    /// Lets another session claim this descriptor (the session is closing).
    pub(crate) fn release(&self) {
        claimed().retain(|s| s != self);
    }
}
