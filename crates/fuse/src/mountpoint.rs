//! Checking a mount point before mounting, and unmounting robustly.

use std::io;
use std::path::Path;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("the mount point {0} does not exist; make it with: mkdir -p {0}")]
    Missing(String),
    #[error("the mount point {0} is not a directory")]
    NotDir(String),
    #[error("the mount point {0} is not empty; memfs mounts only on an empty directory")]
    NotEmpty(String),
    #[error("{0} is already a mount point; unmount it first: umount {0}")]
    AlreadyMounted(String),
    #[error("a stale mount of a crashed memfs is at {0} and could not be cleared; clear it with: fusermount3 -u -z {0} (as root: umount -l {0})")]
    Stale(String),
    #[error("there is no /dev/fuse on this machine: load the fuse module (modprobe fuse), or run where FUSE is available")]
    NoDevFuse,
    #[error("mounting as a user other than root needs fusermount3 on the PATH (Debian: apt-get install fuse3)")]
    NoFusermount,
    #[error("/dev/fuse is not open to this user (it is usually mode 0666): ask root to run `chmod 0666 /dev/fuse`, or mount as root")]
    DevFuseDenied,
    #[error("cannot mount at {0}: {1}")]
    Io(String, io::Error),
}

/// Everything that can be checked before asking the kernel.
pub fn check(mountpoint: &Path) -> Result<(), MountError> {
    let shown = mountpoint.display().to_string();
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::NoDevFuse);
    }
    if !rustix::process::geteuid().is_root() {
        if which("fusermount3").is_none() {
            return Err(MountError::NoFusermount);
        }
        let rw = rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK;
        if rustix::fs::access("/dev/fuse", rw).is_err() {
            return Err(MountError::DevFuseDenied);
        }
    }
    // Opening the directory reaches a FUSE daemon (a `stat` may be answered
    // from the kernel's cache), so it is what tells a stale mount.
    match std::fs::metadata(mountpoint).and_then(|m| std::fs::read_dir(mountpoint).map(|_| m)) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            // A FUSE mount whose process died: detach it, then look again.
            lazy_unmount(mountpoint);
            if std::fs::read_dir(mountpoint).is_err() || is_mount_point(mountpoint) {
                return Err(MountError::Stale(shown));
            }
            crate::say!("memfs: cleared a stale mount at {shown}");
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(MountError::Missing(shown)),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Err(MountError::NotDir(shown)),
        Err(e) => return Err(MountError::Io(shown, e)),
        Ok(m) if !m.is_dir() => return Err(MountError::NotDir(shown)),
        Ok(_) => {}
    }
    if is_mount_point(mountpoint) {
        return Err(MountError::AlreadyMounted(shown));
    }
    let mut entries =
        std::fs::read_dir(mountpoint).map_err(|e| MountError::Io(shown.clone(), e))?;
    if entries.next().is_some() {
        return Err(MountError::NotEmpty(shown));
    }
    Ok(())
}

/// Detaches the mount at `mountpoint` even while files in it are open.
pub fn lazy_unmount(mountpoint: &Path) -> bool {
    if rustix::process::geteuid().is_root()
        && rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::DETACH).is_ok()
    {
        return true;
    }
    Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mountpoint)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `path` is listed as a mount point in /proc/self/mountinfo.
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(canonical) = std::fs::canonicalize(path) else {
        return false;
    };
    let Some(wanted) = canonical.to_str() else {
        return false;
    };
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| {
        info.lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|mount| unescape(mount) == wanted)
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `mount -o remount,ro PATH` on a memfs mount runs `memfs PATH -o OPTIONS`
/// (the FUSE mount helper takes the source name, `memfs`, for the program to
/// run). This does the remount itself: read-only or read-write, keeping
/// nodev and nosuid, which memfs always mounts with.
pub fn remount(mountpoint: &Path, options: &str) -> io::Result<()> {
    use rustix::mount::MountFlags;
    let opts: Vec<&str> = options.split(',').collect();
    if !opts.contains(&"remount") {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "as a mount helper memfs only remounts; mount with: memfs mount MOUNTPOINT",
        ));
    }
    let mut flags = MountFlags::NODEV | MountFlags::NOSUID;
    if opts.contains(&"ro") {
        flags |= MountFlags::RDONLY;
    }
    Ok(rustix::mount::mount_remount(mountpoint, flags, "")?)
}
