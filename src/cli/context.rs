//! What every command is given: `Context`, where things are (state directory, workspace) and
//! where output goes, with the printing every command shares. `mod.rs` builds it from the
//! process and dispatches; the command files take it; it knows none of them.

use super::output::{self, write_to, Exit, Sink};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use std::path::PathBuf;

/// What every command needs: where things are and where output goes.
pub struct Context {
    /// The selected workspace's state directory (absolute, or relative to the working
    /// directory after `-chdir`): `state_root` for `default`, else its directory under it.
    pub state_dir: PathBuf,
    /// The state directory as configured (`-state-dir`, `CAIRN_STATE_DIR`, `.cairn`): the
    /// backend record, the selected workspace and every workspace's state live under it.
    pub state_root: PathBuf,
    /// The selected workspace (`terraform.workspace`).
    pub workspace: String,
    /// Where `workspace` came from.
    pub workspace_source: crate::engine::api::workspaces::WorkspaceSource,
    pub stdout: Sink,
    pub stderr: Sink,
    pub stdout_tty: bool,
    pub stderr_tty: bool,
    pub stdin_tty: bool,
}

impl Context {
    /// The state opened for reading (`None`: there is no state yet), the store's warnings
    /// (torn tail, bad checkpoint) printed.
    pub(crate) fn read_store(
        &self,
        command: &str,
    ) -> Result<Option<crate::engine::api::StateRead>, Diagnostic> {
        let Some((state, warnings)) =
            crate::engine::api::StateRead::open(&self.state_dir, command)?
        else {
            // No state here: if the configuration keeps it in a backend Cairn has no store
            // for, say so rather than show an empty state.
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            if let Some(d) = crate::engine::api::backend::unsupported_backend(&cwd) {
                return Err(d);
            }
            return Ok(None);
        };
        self.recovered(warnings);
        Ok(Some(state))
    }

    /// Prints the store's recovery warnings.
    pub(crate) fn recovered(&self, warnings: Vec<String>) {
        for w in warnings {
            let d = Diagnostic::warning("State recovered", w);
            self.report(&SourceMap::new(), &Diagnostics::from(d), false);
        }
    }

    /// What early evaluation reads in this process: `vars`, the environment, the working
    /// directory and the selected workspace.
    pub(crate) fn early_inputs(
        &self,
        vars: &[crate::config::VarArg],
    ) -> crate::config::EarlyInputs {
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        crate::config::EarlyInputs::new(
            vars,
            &env,
            std::path::Path::new("."),
            Some(&self.workspace),
        )
    }

    /// What drawing `state` needs of the configuration in the working directory (nested
    /// block shapes, provider source addresses), found without starting a provider.
    pub(crate) fn state_view(
        &self,
        state: &cairn_state::Snapshot,
    ) -> crate::engine::schema_checks::StateView {
        let req = crate::engine::schema_checks::ValidateRequest {
            dir: std::env::current_dir().unwrap_or_else(|_| ".".into()),
            state_dir: self.state_dir.clone(),
            env: std::env::vars().collect(),
            inputs: self.early_inputs(&[]),
        };
        crate::engine::schema_checks::state_view(&req, state)
    }

    /// Colour for (stdout, stderr) given the command's `-no-color`.
    pub fn colors(&self, no_color: bool) -> (bool, bool) {
        let env = std::env::var("NO_COLOR").ok();
        (
            output::color_enabled(no_color, self.stdout_tty, env.as_deref()),
            output::color_enabled(no_color, self.stderr_tty, env.as_deref()),
        )
    }

    /// The selected workspace when one was selected (`None`: `default` by default).
    pub fn selected_workspace(&self) -> Option<String> {
        (self.workspace_source != crate::engine::api::workspaces::WorkspaceSource::Default)
            .then(|| self.workspace.clone())
    }

    pub fn out(&self, text: &str) {
        write_to(&self.stdout, text);
    }

    pub fn err(&self, text: &str) {
        write_to(&self.stderr, text);
    }

    /// Prints diagnostics to standard error (human form) and says whether any was an error.
    pub fn report(&self, map: &SourceMap, diags: &Diagnostics, no_color: bool) -> bool {
        let (_, color) = self.colors(no_color);
        self.err(&output::render_diagnostics(map, diags, color));
        diags.has_errors()
    }

    /// Prints one diagnostic that has no source span (CLI and state problems).
    pub fn fail(&self, d: Diagnostic, no_color: bool) -> Exit {
        self.report(&SourceMap::new(), &Diagnostics::from(d), no_color);
        Exit::Error
    }
}
