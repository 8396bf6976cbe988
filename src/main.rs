//! The `cairn` binary: everything happens in `cairn::cli`.

/// mimalloc instead of the system allocator: the engine allocates many small values from
/// several threads at once (expression values, addresses, events), where glibc's malloc spent
/// about a third of all instructions of a large apply. The `system-alloc` feature leaves it
/// out (`cargo build --features system-alloc`): heap profilers such as heaptrack see the system
/// allocator's calls only, and the two can be compared (issue 31).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cairn::cli::main());
}
