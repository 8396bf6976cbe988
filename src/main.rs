//! The `cairn` binary: everything happens in `cairn::cli`.

/// mimalloc instead of the system allocator: the engine allocates many small values from
/// several threads at once (expression values, addresses, events), where glibc's malloc spent
/// about a third of all instructions of a large apply. The `system-alloc` feature leaves it
/// out (`cargo build --features system-alloc`): heap profilers such as heaptrack see the system
/// allocator's calls only, and the two can be compared (issue 31).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages off for this process (issue 31): mimalloc asks the kernel for huge
/// pages on its arenas, and one touched byte then costs 2 MiB of zeroed memory. A
/// 10,000-resource apply peaked at 186–221 MiB with them and 136–142 MiB without, and zeroing
/// them was 30 % of its CPU. (What `MIMALLOC_ALLOW_THP=0` does, which mimalloc reads before
/// `main`; provider plugins started by this process inherit it, as they would that.) How fast
/// freed memory goes back is decided once the configuration's size is known
/// (`engine::source::size_memory_for`).
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: a process-wide flag, no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() {
    no_huge_pages();
    std::process::exit(cairn::cli::main());
}
