//! The `cairn` binary: everything happens in `cairn::cli`.

fn main() {
    println!("cairn {}", env!("CARGO_PKG_VERSION"));
}
