//! collections functions (being written).

use super::Def;

pub(super) const DEFS: &[Def] = &[];
