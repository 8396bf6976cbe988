//! The `cairn` binary: everything happens in `cairn::cli`.

fn main() {
    std::process::exit(cairn::cli::main());
}
