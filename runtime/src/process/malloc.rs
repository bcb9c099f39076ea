//! The C allocator's setting for a long-running operator process.

/// Limits glibc's malloc to one arena. glibc gives threads that contend for the allocator arenas
/// of their own (up to eight per core), and memory freed into one arena is not reused by
/// threads of another, while the caches are built by every runtime thread in turn. glibc
/// fixes the limit when a second arena is first needed, so this must run before the async
/// runtime starts ([`crate::operator::block_on`]). At 1,000 live jobs, peak RSS 73.3 MB by
/// default, 66.0 MB with one arena, at the same throughput. A no-op off glibc.
#[allow(unsafe_code)]
pub fn single_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator, under the allocator's own lock;
    // it reads and keeps no pointer.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
