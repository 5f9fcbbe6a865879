//! Whether `flock()` on a database's lock files excludes every writer: the file system the
//! database is on, from its `statfs` magic number.
//!
//! The queue is only correct where `flock()` excludes every process that can write the
//! database, that is on a local disk. On a network file system `flock()` is local to each
//! client (or emulated with byte-range locks the server may lose), so writers on other
//! machines do not see the locks taken here. `writerlock status` (the command and
//! `python -m writerlock status`) and `writerlock check` report what this module finds.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a file system's `flock()` guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// A local file system: `flock()` excludes every process on this machine, and only this
    /// machine can open the file.
    Local,
    /// A network file system: other machines may write the database without seeing the
    /// locks taken here.
    Network,
    /// A FUSE file system: its guarantees depend on the implementation.
    Fuse,
    /// A file system this library does not know.
    Unknown,
}

impl FsKind {
    /// `local`, `network`, `fuse` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            FsKind::Local => "local",
            FsKind::Network => "network",
            FsKind::Fuse => "fuse",
            FsKind::Unknown => "unknown",
        }
    }
}

/// The file system a database is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSystem {
    /// Its name, such as `ext4` or `nfs` (`unknown` when the magic number is not known).
    pub name: &'static str,
    /// Its `statfs` magic number, or `None` when `statfs` failed.
    pub magic: Option<u64>,
    /// What its `flock()` guarantees.
    pub kind: FsKind,
}

impl FileSystem {
    /// The file system of the database at `db`, or of its directory when the file does not
    /// exist yet.
    pub fn of_database(db: &Path) -> FileSystem {
        let target = if db.exists() {
            db.to_path_buf()
        } else {
            db.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        FileSystem::from_magic(statfs_magic(&target))
    }

    /// The file system with this `statfs` magic number (`None`: `statfs` failed).
    pub fn from_magic(magic: Option<u64>) -> FileSystem {
        let (name, kind) = match magic {
            Some(m) => classify(m),
            None => ("unknown", FsKind::Unknown),
        };
        FileSystem { name, magic, kind }
    }

    /// The magic number in hex (`0xef53`), or an empty string when `statfs` failed.
    pub fn magic_hex(&self) -> String {
        self.magic.map(|m| format!("0x{m:x}")).unwrap_or_default()
    }

    /// The warning for a database on this file system, or `None` on a local disk.
    pub fn warning(&self) -> Option<String> {
        let name = self.name;
        match self.kind {
            FsKind::Local => None,
            FsKind::Network => Some(format!(
                "the database is on a network file system ({name}): flock() there does not \
                 exclude writers on other machines (it is local to each client, or emulated \
                 with byte-range locks the server may lose), so writers elsewhere can write at \
                 the same time and fail with \"database is locked\"; the queue is only correct \
                 on a local disk: move the database to one"
            )),
            FsKind::Fuse => Some(
                "the database is on a FUSE file system: whether flock() excludes writers, and \
                 writers on other machines, depends on its implementation; the queue is only \
                 known to be correct on a local disk"
                    .to_string(),
            ),
            FsKind::Unknown => Some(format!(
                "the database is on a file system writerlock does not know ({}): the queue is \
                 only correct where flock() excludes every writer, that is on a local disk; \
                 check that this one is",
                self.magic
                    .map(|m| format!("magic 0x{m:x}"))
                    .unwrap_or_else(|| "statfs failed".into())
            )),
        }
    }
}

/// The `statfs` magic number of the file system holding `path`, or `None` when `statfs`
/// fails.
pub fn statfs_magic(path: &Path) -> Option<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statfs is a valid out buffer; the path is NUL-terminated.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut buf) };
    // f_type is a signed word on some targets; the magic numbers are 32-bit.
    (rc == 0).then_some(buf.f_type as u64 & 0xffff_ffff)
}

/// The name and kind of a file system from its `statfs` magic number.
pub fn classify(magic: u64) -> (&'static str, FsKind) {
    use FsKind::{Fuse, Local, Network};
    match magic {
        0x6969 => ("nfs", Network),
        0x517B => ("smb", Network),
        0xFF53_4D42 => ("cifs", Network),
        0xFE53_4D42 => ("smb2", Network),
        0x00C3_6400 => ("ceph", Network),
        0x5346_414F | 0x6B41_4653 => ("afs", Network),
        0x7375_7245 => ("coda", Network),
        0x0102_1997 => ("9p", Network),
        0x0116_1970 => ("gfs2", Network),
        0x7461_636F => ("ocfs2", Network),
        0x0BD0_0BD0 => ("lustre", Network),
        0x2011_BAB0 => ("exfat", Local),
        0x6573_5546 => ("fuse", Fuse),
        0xEF53 => ("ext2/3/4", Local),
        0x5846_5342 => ("xfs", Local),
        0x9123_683E => ("btrfs", Local),
        0x0102_1994 => ("tmpfs", Local),
        0x8584_58F6 => ("ramfs", Local),
        0x794C_7630 => ("overlayfs", Local),
        0x2FC1_2FC1 => ("zfs", Local),
        0xF2F5_2010 => ("f2fs", Local),
        0x5265_4973 => ("reiserfs", Local),
        0x3153_464A => ("jfs", Local),
        0x4D44 => ("vfat", Local),
        0x5346_544E => ("ntfs", Local),
        0x7366_746E => ("ntfs3", Local),
        0xCAFE_4A11 => ("bpf", Local),
        0x6462_6720 => ("debugfs", Local),
        _ => ("unknown", FsKind::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_decides_the_warning() {
        assert_eq!(FileSystem::from_magic(Some(0xEF53)).warning(), None);
        let nfs = FileSystem::from_magic(Some(0x6969));
        assert_eq!((nfs.name, nfs.kind), ("nfs", FsKind::Network));
        assert!(nfs
            .warning()
            .is_some_and(|w| w.contains("network file system (nfs)")));
        assert!(FileSystem::from_magic(Some(0x6573_5546))
            .warning()
            .is_some_and(|w| w.contains("FUSE")));
        let odd = FileSystem::from_magic(Some(0x1234));
        assert_eq!(odd.magic_hex(), "0x1234");
        assert!(odd.warning().is_some_and(|w| w.contains("(magic 0x1234)")));
        let failed = FileSystem::from_magic(None);
        assert_eq!((failed.name, failed.kind), ("unknown", FsKind::Unknown));
        assert_eq!(failed.magic_hex(), "");
        assert!(failed
            .warning()
            .is_some_and(|w| w.contains("(statfs failed)")));
    }

    #[test]
    fn a_database_not_yet_created_is_judged_by_its_directory() {
        let dir = std::env::temp_dir();
        let missing = dir.join(format!("writerlock-fs-{}.db", std::process::id()));
        assert_eq!(
            FileSystem::of_database(&missing),
            FileSystem::from_magic(statfs_magic(&dir))
        );
    }
}
