//! The C allocator's one setting memfs changes: allocations of 256 KiB and
//! more are mapped of their own and given back to the system when freed.
//!
//! glibc's malloc otherwise raises that threshold each time a mapped block
//! is freed (up to 32 MiB), after which large blocks come from its arenas
//! and stay resident once freed. The search index's writer allocates a
//! term table of about 4 MiB and arena pages of 1 MiB for each commit:
//! with the threshold left to move, a server with 50 stores written and
//! searched once each held 167 MiB of anonymous memory, and 6.7 MiB with
//! it fixed (docs/BENCHMARKS-HTTP.md, "Search's memory"; issue 54). A
//! `MALLOC_MMAP_THRESHOLD_` in the environment is the user's choice and
//! is kept.

/// The threshold set, in bytes.
const MMAP_THRESHOLD: i32 = 256 * 1024;

/// Sets the threshold, before the program's threads start.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt takes glibc's allocator lock and changes one of
        // its parameters; it has no memory-safety precondition and is
        // called here before any thread of ours exists. Its result (0 on
        // a refused value) leaves the default, which is only slower to
        // give memory back.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}
