//! What a command answers: [`Report`], its result (when it got that far) with every
//! diagnostic and note.

use crate::config::Config;
use crate::diag::Diagnostics;
use std::sync::Arc;

/// What a command produced: its result (when it got that far), every diagnostic, notes for
/// the user, and the configuration (to render diagnostics' source snippets).
pub struct Report<T> {
    pub result: Option<T>,
    pub diags: Diagnostics,
    pub notes: Vec<String>,
    pub config: Option<Arc<Config>>,
}

impl<T> Report<T> {
    pub(super) fn fail(diags: Diagnostics, config: Option<Arc<Config>>) -> Self {
        Report {
            result: None,
            diags,
            notes: Vec::new(),
            config,
        }
    }
    pub fn ok(&self) -> bool {
        self.result.is_some() && !self.diags.has_errors()
    }
}
