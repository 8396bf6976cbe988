//! The `cairn` binary: everything happens in `cairn::cli`.

/// mimalloc instead of the system allocator: the engine allocates many small values from
/// several threads at once (expression values, addresses, events), where glibc's malloc spent
/// about a third of all instructions of a large apply.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cairn::cli::main());
}
