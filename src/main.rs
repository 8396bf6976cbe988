//! The `cairn` binary: everything happens in `cairn::cli`.

/// mimalloc instead of the system allocator: the engine allocates many small values from
/// several threads at once (expression values, addresses, events), where glibc's malloc spent
/// about a third of all instructions of a large apply. The `system-alloc` feature leaves it
/// out (`cargo build --features system-alloc`): heap profilers such as heaptrack see the system
/// allocator's calls only, and the two can be compared (issue 31).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its `mi_option_e` in mimalloc 3, which `libmimalloc-sys`
/// builds, has no Rust name for it): the one before `use_numa_nodes`.
#[cfg(not(feature = "system-alloc"))]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
#[cfg(not(feature = "system-alloc"))]
const _: () = assert!(libmimalloc_sys::mi_option_use_numa_nodes == MI_OPTION_PURGE_DELAY + 1);

/// Memory given back as soon as it is free (issue 31): the peak a command reaches is what
/// CI runners and laptops pay. Measured with 100,000 resources (README, Speed):
/// - Transparent huge pages off for this process. mimalloc asks the kernel for huge pages on
///   its arenas, and one touched byte then costs 2 MiB of zeroed memory: a 10,000-resource
///   apply peaked at 186–221 MiB with them and 136–142 MiB without, and zeroing them was
///   30 % of its CPU. (What `MIMALLOC_ALLOW_THP=0` does, done before the first large
///   allocation; provider plugins started by this process inherit it, as they would that.)
/// - mimalloc's purge delay 0: freed pages are returned at once instead of 10–100 ms later
///   (100k `plan` 383 → 344 MiB, `apply` 623 → 577 MiB, at some system CPU time).
fn give_memory_back() {
    #[cfg(target_os = "linux")]
    // SAFETY: a process-wide flag, no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    #[cfg(not(feature = "system-alloc"))]
    // SAFETY: sets an option of the allocator this binary links; any value is valid.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

fn main() {
    give_memory_back();
    std::process::exit(cairn::cli::main());
}
