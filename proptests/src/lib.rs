//! Property tests of Cairn's lifecycle: scenario generators ([`gen`]), the configuration's
//! dependency model computed independently of the engine ([`model`]), the world the real
//! engine runs in ([`harness`]), the rules as checks ([`check`]) and the properties that apply
//! them to generated scenarios ([`props`]). `tests/properties.rs` runs every property on the
//! real engine; `tests/broken_rules.rs` runs the engine with one rule deliberately broken
//! (`cairn::engine::Sabotage`) and shows the matching property fails.

pub mod check;
pub mod cover;
pub mod gen;
pub mod harness;
pub mod measure;
pub mod model;
pub mod props;
