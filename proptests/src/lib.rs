//! Property tests of Cairn's lifecycle: scenario generators ([`gen`]), the configuration's
//! dependency model computed independently of the engine ([`model`]), the world the real
//! engine runs in ([`harness`]), and the rules as checks ([`check`]). The lifecycle properties are
//! in `tests/properties.rs`; `tests/broken_rules.rs` shows each check failing on the outcome a
//! broken engine would produce.

pub mod check;
pub mod gen;
pub mod harness;
pub mod model;
