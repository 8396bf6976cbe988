//! The command tree (clap derive) and the argument normalizer that lets Terraform's single-dash
//! long flags (`-var`, `-json`, `-chdir=DIR`, `-refresh=false`) work alongside `--long` ones.
//!
//! Decisions:
//! - The normalizer derives the flags it knows from the clap `Command` itself, per subcommand,
//!   so a new flag is never forgotten. It rewrites `-name` / `-name=value` to `--name…` only for
//!   long names of two characters or more that the current command (or an ancestor's global
//!   flag) declares; single-letter shorts and every flag *value* (`-var 'k=-1'`,
//!   `-target -weird`) pass through untouched, and so does everything after `--`.
//! - Every boolean flag also accepts Terraform's (Go's) `-flag=true|false` spelling: the tree is
//!   post-processed so each `SetTrue` flag takes an optional `=BOOL` (`require_equals`, so a
//!   following positional argument is never swallowed).
//! - An unknown `-word` is also given two dashes, so clap reports it whole (with a "did you
//!   mean") rather than as a cluster of unknown short flags.
//! - `-var` and `-var-file` are separate lists in the derive structs, but Terraform applies them
//!   in command-line order; `parse` recovers that order from clap's indices.
//! - Durations (`-lock-timeout=1m30s`) use Go's syntax, since that is what Terraform users type.

use crate::config::VarArg;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Cairn: infrastructure as code for Terraform-style configurations, with event-sourced state.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Flags may be written Terraform's way (-json, -var 'k=v', -refresh=false) \
                  or with two dashes (--json)."
)]
pub struct Cli {
    /// Switch to DIR before doing anything else.
    #[arg(long, global = true, value_name = "DIR")]
    pub chdir: Option<PathBuf>,
    /// Where the state lives [env: CAIRN_STATE_DIR] [default: .cairn in the working directory].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check the configuration, install its providers, write the lock file and create the
    /// state directory.
    Init(InitArgs),
    /// Check the configuration for errors, without providers or state.
    Validate(ValidateArgs),
    /// Evaluate the configuration without providers or state and print every instance.
    Inspect(InspectArgs),
    /// Read expressions from standard input and print their values.
    Console(ConsoleArgs),
    /// Show the changes that apply would make.
    Plan(PlanArgs),
    /// Make the changes: plan, confirm, apply (or apply a saved plan).
    Apply(ApplyArgs),
    /// Read every managed object from its provider and record what changed.
    Refresh(RefreshArgs),
    /// Adopt an existing object into the state at ADDR (its resource block must be in the
    /// configuration), by the provider's import of ID.
    Import(ImportArgs),
    /// Destroy every managed object.
    Destroy(DestroyArgs),
    /// Run the configuration's tests: the run blocks of its `*.tftest.hcl` files (in the
    /// configuration's directory and in `tests/`), each file in states of its own.
    Test(TestArgs),
    /// Show a saved plan, or the current state.
    Show(ShowArgs),
    /// Print a graph as Graphviz DOT (or SVG).
    Graph(GraphArgs),
    /// Inspect and edit the state.
    #[command(subcommand)]
    State(StateCommand),
    /// One line per run: id, command, start, duration, outcome, changes.
    History(HistoryArgs),
    /// The raw events of the state log.
    Log(LogArgs),
    /// Show output values.
    Output(OutputArgs),
    /// Print the version.
    Version(VersionArgs),
    /// Release a shared state's lock held by a run that is gone (PostgreSQL: ends its database
    /// session; S3: deletes the lock object).
    ForceUnlock(ForceUnlockArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Serve a read-only web view of the history, the state and plans on 127.0.0.1.
    Ui(UiServeArgs),
    /// Create, select, list, show and delete workspaces (several states of one configuration).
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Terraform Stacks: components and deployments (`*.tfcomponent.hcl`, `*.tfdeploy.hcl`).
    #[command(subcommand)]
    Stack(StackCommand),
    /// Reformat your configuration in the standard style (Terraform's canonical format).
    #[command(long_about = FMT_HELP)]
    Fmt(FmtArgs),
    /// Mark a resource instance as not fully functional: the next plan replaces it.
    #[command(long_about = TAINT_HELP)]
    Taint(TaintArgs),
    /// Remove the 'tainted' state from a resource instance.
    #[command(long_about = UNTAINT_HELP)]
    Untaint(TaintArgs),
    /// Show the providers required for this configuration, by module, and those the state
    /// requires; `providers schema|lock|mirror` below.
    Providers(ProvidersArgs),
    /// Install or upgrade the remote modules of the configuration (modules only: no
    /// providers, no backend).
    Get(GetArgs),
    /// Show all declared modules in the working directory, with their resolved versions.
    Modules(ModulesArgs),
    /// Metadata about Cairn itself (`metadata functions -json`).
    #[command(subcommand)]
    Metadata(MetadataCommand),
    /// Save an API token for a host (default: app.terraform.io) in
    /// ~/.terraform.d/credentials.tfrc.json, read from standard input.
    Login(LoginArgs),
    /// Remove the saved API token for a host (default: app.terraform.io) from
    /// credentials.tfrc.json.
    Logout(LoginArgs),
}

const TAINT_HELP: &str = "Mark a resource instance as not fully functional.

Cairn uses the term \"tainted\" to describe a resource instance which may not be fully \
functional, either because its creation partially failed or because you've manually marked \
it as such using this command.

This will not modify your infrastructure directly, but subsequent plans will include actions \
to destroy the remote object and create a new object to replace it. The taint is recorded in \
the state's log (`cairn history`, `cairn log`).

You can remove the \"taint\" state from a resource instance using the \"cairn untaint\" \
command.

The address is in the usual resource address syntax, such as: aws_instance.foo, \
aws_instance.bar[1], module.foo.module.bar.aws_instance.baz";

const UNTAINT_HELP: &str = "Remove the 'tainted' state from a resource instance.

Cairn uses the term \"tainted\" to describe a resource instance which may not be fully \
functional, either because its creation partially failed or because you've manually marked \
it as such using the \"cairn taint\" command.

This command removes that state from a resource instance, causing Cairn to see it as \
fully-functional and not in need of replacement.

This will not modify your infrastructure directly. It only avoids Cairn planning to replace \
a tainted instance in a future operation.";

#[derive(Debug, Args)]
pub struct TaintArgs {
    /// The resource instance, e.g. `aws_instance.foo` or `module.m.aws_instance.bar[1]`.
    #[arg(value_name = "ADDRESS")]
    pub addr: String,
    /// If specified, the command will succeed (exit code 0) even if the resource is missing.
    #[arg(long)]
    pub allow_missing: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ProvidersArgs {
    #[command(subcommand)]
    pub command: Option<ProvidersCommand>,
}

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Print the schemas of the providers the configuration uses (requires -json).
    Schema(ProvidersSchemaArgs),
    /// Write the hashes of the selected provider versions for each platform into
    /// .terraform.lock.hcl.
    Lock(ProvidersLockArgs),
    /// Save the providers the configuration requires into DIR, a filesystem mirror (packed
    /// layout, with network mirror indexes) other machines can install from.
    Mirror(ProvidersMirrorArgs),
}

#[derive(Debug, Args)]
pub struct ProvidersSchemaArgs {
    /// Print the schemas as a JSON document (required).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProvidersLockArgs {
    /// A target platform OS_ARCH (repeatable; default: this machine's).
    #[arg(long, value_name = "OS_ARCH")]
    pub platform: Vec<String>,
    /// Take the packages from this filesystem mirror directory instead of their origin
    /// registries.
    #[arg(long, value_name = "DIR")]
    pub fs_mirror: Option<PathBuf>,
    /// Take the packages from this network mirror (https URL) instead of their origin
    /// registries.
    #[arg(long, value_name = "URL")]
    pub net_mirror: Option<String>,
    /// Only these providers (source addresses; default: every provider the configuration
    /// requires).
    #[arg(value_name = "PROVIDER")]
    pub providers: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ProvidersMirrorArgs {
    /// A target platform OS_ARCH (repeatable; default: this machine's).
    #[arg(long, value_name = "OS_ARCH")]
    pub platform: Vec<String>,
    /// The mirror directory (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// Check already-downloaded modules for newer versions and install the newest allowed.
    #[arg(long)]
    pub update: bool,
    /// No colours.
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct ModulesArgs {
    /// Print the modules as a JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MetadataCommand {
    /// Print the signatures and descriptions of every built-in function (requires -json).
    Functions(MetadataFunctionsArgs),
}

#[derive(Debug, Args)]
pub struct MetadataFunctionsArgs {
    /// Print the signatures as a JSON document (required).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The host (default: app.terraform.io).
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace and select it.
    New(WorkspaceNameArgs),
    /// Select a workspace.
    Select {
        #[command(flatten)]
        name: WorkspaceNameArgs,
        /// Create the workspace if it does not exist.
        #[arg(long, default_value_t = false)]
        or_create: bool,
    },
    /// List the workspaces; `*` marks the selected one.
    List,
    /// Print the selected workspace's name.
    Show,
    /// Delete a workspace and its state (its log and history).
    Delete {
        #[command(flatten)]
        name: WorkspaceNameArgs,
        /// Delete it even if its state still tracks objects (they are forgotten, not destroyed).
        #[arg(long, default_value_t = false)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// Check the stack's component and deployment configuration files for errors.
    Validate(ValidateArgs),
    /// Install the components' modules and record the backend of the stack's states.
    Init(StackInitArgs),
    /// Plan every component of every deployment, in dependency order.
    Plan(StackPlanArgs),
    /// Apply the stack, round by round until no component is deferred.
    Apply(StackApplyArgs),
    /// Destroy every component of every deployment, dependents first.
    Destroy(StackApplyArgs),
    /// Show each deployment's component instances: their resources and outputs.
    Show(StackShowArgs),
    /// Show a deployment's stack outputs.
    Output(StackOutputArgs),
    /// List the stack's runs, or show one with its component instances' runs.
    History(StackHistoryArgs),
}

#[derive(Debug, Args)]
pub struct StackInitArgs {
    /// Where the stack's states live: local, pg or s3.
    #[arg(long, default_value = "local", value_name = "local|pg|s3")]
    pub backend: String,
    /// A backend argument KEY=VALUE, or a FILE of `key = "value"` lines (repeatable).
    #[arg(long, value_name = "KEY=VALUE|FILE")]
    pub backend_config: Vec<String>,
    /// Copy every state of the previous backend to the new one.
    #[arg(long, default_value_t = false, value_name = "BOOL")]
    pub migrate_state: bool,
    /// Use the new backend without copying the previous one's states.
    #[arg(long, default_value_t = false, value_name = "BOOL")]
    pub reconfigure: bool,
    /// Download the newest module versions the constraints allow.
    #[arg(long)]
    pub upgrade: bool,
    #[command(flatten)]
    pub ui: UiArgs,
}

/// What `stack plan`, `apply` and `destroy` share.
#[derive(Debug, Args)]
pub struct StackRunArgs {
    /// Only this deployment.
    #[arg(long, value_name = "NAME")]
    pub deployment: Option<String>,
    /// How many component instances are planned or applied at once.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub parallelism: usize,
    /// How long to wait for each component state's lock, e.g. 5s, 1m30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct StackPlanArgs {
    #[command(flatten)]
    pub run: StackRunArgs,
    /// Plan to destroy every component.
    #[arg(long)]
    pub destroy: bool,
    /// Exit 0 with no changes, 1 on error, 2 with changes (or deferred components).
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Save the round's plans to FILE, for `cairn stack apply FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StackApplyArgs {
    /// A stack plan saved with `stack plan -out=FILE` (applied without asking).
    #[arg(value_name = "FILE")]
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub run: StackRunArgs,
    /// Skip the `yes` confirmation of each round.
    #[arg(long)]
    pub auto_approve: bool,
    /// Be one runner of a fleet sharing the stack's work through its PostgreSQL backend:
    /// join (or start) the stack run and apply the components this runner claims (with
    /// `stack destroy`, destroy them, dependents first).
    #[arg(long)]
    pub runner: bool,
}

#[derive(Debug, Args)]
pub struct StackShowArgs {
    /// Only this deployment.
    #[arg(long, value_name = "NAME")]
    pub deployment: Option<String>,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct StackHistoryArgs {
    /// A stack run's id: show that run, each round and each component instance's runs.
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct StackOutputArgs {
    /// The deployment whose outputs to show.
    #[arg(long, value_name = "NAME")]
    pub deployment: String,
    /// Only this output (printed raw when it is a string).
    #[arg(value_name = "OUTPUT")]
    pub name: Option<String>,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct WorkspaceNameArgs {
    /// The workspace's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// How long to wait for the state's lock (Go duration: 30s, 1m30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
    /// Hold a state lock during the operation (-lock=false: don't; dangerous if others might
    /// run commands against the same state at the same time).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub lock: bool,
    /// No colours.
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct UiServeArgs {
    /// The port to listen on (default: one the system chooses).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub port: u16,
    /// A saved plan (`plan -out=FILE`) to show with its graph (repeatable).
    #[arg(long = "plan", value_name = "FILE")]
    pub plan: Vec<PathBuf>,
}

/// Input variables, `-var` and `-var-file`, shared by every command that evaluates.
#[derive(Debug, Args, Clone, Default)]
pub struct VarArgs {
    /// Set a variable: -var 'NAME=VALUE' (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub var: Vec<String>,
    /// Read variables from a .tfvars file (repeatable).
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_file: Vec<PathBuf>,
}

/// Output switches shared by most commands.
#[derive(Debug, Args, Clone, Default)]
pub struct UiArgs {
    /// Machine-readable output: one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// No colours (also: NO_COLOR, or output not a terminal).
    #[arg(long)]
    pub no_color: bool,
}

/// What every command that walks the state and providers accepts.
#[derive(Debug, Args, Clone)]
pub struct WalkArgs {
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub ui: UiArgs,
    /// Limit to ADDR and what it depends on (repeatable).
    #[arg(long, value_name = "ADDR")]
    pub target: Vec<String>,
    /// Leave out ADDR and everything that depends on it (repeatable; OpenTofu's inverse of
    /// -target, not with it).
    #[arg(long, value_name = "ADDR")]
    pub exclude: Vec<String>,
    /// Hold a state lock during the operation (-lock=false: don't; dangerous if others might
    /// run commands against the same state at the same time).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub lock: bool,
    /// Show warnings in a compact form that includes only the summary messages.
    #[arg(long)]
    pub compact_warnings: bool,
    /// How many provider calls may run at once.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub parallelism: usize,
    /// How long to wait for the state lock, e.g. 5s, 1m30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
    /// Never prompt; -input=false refuses where an answer would be needed.
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub input: bool,
}

/// The planning switches shared by `plan`, `apply` and `destroy`.
#[derive(Debug, Args, Clone)]
pub struct PlanFlags {
    /// Refresh managed objects before planning (-refresh=false skips it).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub refresh: bool,
    /// Plan to replace ADDR even if nothing changed (repeatable).
    #[arg(long, value_name = "ADDR")]
    pub replace: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Select the newest provider versions the constraints allow, ignoring the lock file's.
    #[arg(long)]
    pub upgrade: bool,
    #[command(flatten)]
    pub ui: UiArgs,
    /// A backend argument KEY=VALUE, or a FILE of `key = "value"` lines (repeatable; later
    /// wins). Keeps secrets such as conn_str out of the configuration.
    #[arg(long, value_name = "KEY=VALUE|FILE")]
    pub backend_config: Vec<String>,
    /// Copy the whole state log from the previous backend to the configured one (which must
    /// be empty), verified by event count and checksum chain.
    #[arg(long, default_value_t = false, value_name = "BOOL")]
    pub migrate_state: bool,
    /// Use the configured backend without copying the state of the previous one.
    #[arg(long, default_value_t = false, value_name = "BOOL")]
    pub reconfigure: bool,
    /// How long to wait for the state locks during a migration, e.g. 5s, 1m30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
    /// Variables for early evaluation: module sources and versions, the backend block and
    /// required_providers may use variables and locals (OpenTofu 1.8).
    #[command(flatten)]
    pub vars: VarArgs,
}

#[derive(Debug, Args)]
pub struct ForceUnlockArgs {
    /// The lock ID a lock error named.
    #[arg(value_name = "LOCK_ID")]
    pub lock_id: String,
    /// Do not ask for confirmation.
    #[arg(long, default_value_t = false, value_name = "BOOL")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub ui: UiArgs,
    /// Variables for early evaluation (module sources, backend, required_providers), as
    /// OpenTofu's validate takes them.
    #[command(flatten)]
    pub vars: VarArgs,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The configuration's directory, or one `.tf` file to evaluate on its own (default: the
    /// working directory).
    pub path: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Run only the test file FILE, a path relative to the configuration's directory
    /// (repeatable).
    #[arg(long, value_name = "FILE")]
    pub filter: Vec<String>,
    #[command(flatten)]
    pub vars: VarArgs,
    /// Print the plan or the state of each run block as it completes.
    #[arg(long)]
    pub verbose: bool,
    /// The directory of test files besides the configuration's own.
    #[arg(long, value_name = "DIR", default_value = "tests")]
    pub test_directory: String,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub vars: VarArgs,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub walk: WalkArgs,
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Save the plan to FILE, for `cairn apply FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Plan to destroy every managed object.
    #[arg(long)]
    pub destroy: bool,
    /// Refresh and read data sources, propose no managed change (`-refresh-only` is an alias).
    #[arg(long, alias = "refresh-only")]
    pub read_only: bool,
    /// Exit 0 with no changes, 1 on error, 2 with changes.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Write a resource block for each `import` block whose resource has none to FILE (a new
    /// file), generated from the imported object.
    #[arg(long, value_name = "FILE")]
    pub generate_config_out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan saved with `plan -out=FILE`.
    #[arg(value_name = "PLANFILE")]
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub walk: WalkArgs,
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Skip the `yes` confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// Record refreshed state, data results and outputs; change no managed object
    /// (`-refresh-only` is an alias).
    #[arg(long, alias = "refresh-only")]
    pub read_only: bool,
    /// Destroy every managed object (as `cairn destroy`).
    #[arg(long)]
    pub destroy: bool,
}

#[derive(Debug, Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub walk: WalkArgs,
    /// Show what refresh would change and record nothing.
    #[arg(long)]
    pub preview: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub walk: WalkArgs,
    /// The resource instance to import to, e.g. `aws_instance.web` or `module.m.x.y["k"]`.
    #[arg(value_name = "ADDR")]
    pub addr: String,
    /// The provider's id of the existing object.
    #[arg(value_name = "ID")]
    pub id: String,
    /// The directory of the configuration that holds ADDR's resource block and configures its
    /// provider (default: the working directory); the state stays where it is.
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    #[command(flatten)]
    pub walk: WalkArgs,
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Skip the `yes` confirmation.
    #[arg(long)]
    pub auto_approve: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A plan saved with `plan -out=FILE`; without it, the current state.
    #[arg(value_name = "PLANFILE")]
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphType {
    Plan,
    Refresh,
    Apply,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Dot,
    Svg,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Which graph: the plan walk, the refresh walk, or the apply walk.
    #[arg(long = "type", value_enum, default_value_t = GraphType::Plan)]
    pub type_: GraphType,
    /// Draw the apply graph of this saved plan.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// dot (Graphviz source) or svg (rendered through Graphviz's `dot`).
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub format: GraphFormat,
    #[command(flatten)]
    pub vars: VarArgs,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the resource instances in state (optionally only those matching ADDR…).
    List(StateListArgs),
    /// Show one resource instance's attributes.
    Show(StateShowArgs),
    /// Forget resource instances (the objects themselves are left alone).
    Rm(StateRmArgs),
    /// Move a resource instance to another address.
    Mv(StateMvArgs),
    /// Print the current state as Terraform state JSON (format version 4).
    Pull(StatePullArgs),
    /// Migrate a Terraform `terraform.tfstate` (version 4) into the log.
    #[command(name = "import-tfstate")]
    ImportTfstate(StateImportArgs),
    /// Check the state's invariants.
    Check(StateCheckArgs),
    /// Check the whole log against its hash chain and its head: damage (lost, changed or
    /// reordered events) is reported with where it starts and what that history held.
    Verify(StateCheckArgs),
    /// Go on from the last good event of a damaged state (sled): keeps a copy of the damaged
    /// store, records the recovery, and lists the objects whose history was lost.
    Recover(StateRecoverArgs),
    /// Replace the state with a Terraform state file (version 4), as a run in the log; refused
    /// over another lineage or a newer serial unless -force.
    #[command(long_about = PUSH_HELP)]
    Push(StatePushArgs),
    /// Replace the provider of the resources in the state.
    #[command(name = "replace-provider")]
    ReplaceProvider(StateReplaceProviderArgs),
}

const PUSH_HELP: &str = "Update the state from a Terraform state file at PATH.

This command \"pushes\" a local Terraform state (format version 4) and replaces the current \
state with it, as one run in the state's log (the state before it stays reachable with \
-at). The command will protect you against writing an older serial or a different state \
lineage (`cairn state pull` prints both) unless you specify the \"-force\" flag.

If PATH is \"-\", then this command will read the state to push from stdin.";

#[derive(Debug, Args)]
pub struct StatePushArgs {
    /// The Terraform state file, or `-` for standard input.
    #[arg(value_name = "PATH")]
    pub path: String,
    /// Write the state even if lineages don't match or the current serial is higher.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Debug, Args)]
pub struct StateReplaceProviderArgs {
    /// The provider the state names now, e.g. `hashicorp/aws` or `registry.terraform.io/hashicorp/aws`.
    #[arg(value_name = "FROM_PROVIDER_FQN")]
    pub from: String,
    /// The provider it should name, e.g. `registry.acme.corp/acme/aws`.
    #[arg(value_name = "TO_PROVIDER_FQN")]
    pub to: String,
    /// Skip interactive approval.
    #[arg(long)]
    pub auto_approve: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// The time-travel position for read commands.
#[derive(Debug, Args, Clone, Default)]
pub struct AtArgs {
    /// Show the state as it was after event SEQ.
    #[arg(long, value_name = "SEQ")]
    pub at: Option<u64>,
}

/// The lock switches for commands that write the state.
#[derive(Debug, Args, Clone)]
pub struct LockArgs {
    /// Hold a state lock during the operation (-lock=false: don't; dangerous if others might
    /// run commands against the same state at the same time).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub lock: bool,
    /// How long to wait for the state lock, e.g. 5s, 1m30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct StateListArgs {
    /// Only instances matching these addresses (a resource, a module, or an instance).
    #[arg(value_name = "ADDR")]
    pub addrs: Vec<String>,
    #[command(flatten)]
    pub at: AtArgs,
}

#[derive(Debug, Args)]
pub struct StateShowArgs {
    #[arg(value_name = "ADDR")]
    pub addr: String,
    #[command(flatten)]
    pub at: AtArgs,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct StateRmArgs {
    #[arg(value_name = "ADDR", required = true)]
    pub addrs: Vec<String>,
    #[command(flatten)]
    pub lock: LockArgs,
    /// Print which instances would be removed, and record nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct StateMvArgs {
    #[arg(value_name = "FROM")]
    pub from: String,
    #[arg(value_name = "TO")]
    pub to: String,
    #[command(flatten)]
    pub lock: LockArgs,
    /// Print what would be moved, and record nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct StatePullArgs {
    #[command(flatten)]
    pub at: AtArgs,
    /// With state encryption configured: write the state in the clear (by default it is
    /// written encrypted with the state's primary method).
    #[arg(long)]
    pub decrypt: bool,
}

#[derive(Debug, Args)]
pub struct StateImportArgs {
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Debug, Args)]
pub struct StateCheckArgs {}

#[derive(Debug, Args)]
pub struct StateRecoverArgs {
    /// How long to wait for the state's lock (Go duration: 30s, 1m30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub lock_timeout: Duration,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Start at event SEQ.
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub from: u64,
    #[command(flatten)]
    pub ui: UiArgs,
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// One output; without it, all of them.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print a string, number or bool output's plain value, for scripts.
    #[arg(long)]
    pub raw: bool,
    /// No colours.
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

const FMT_HELP: &str = "Rewrites all configuration files to Terraform's canonical format. All \
configuration files (.tf), variables files (.tfvars), and testing files (.tftest.hcl, \
.tfmock.hcl) are updated. JSON files (.tf.json, .tfvars.json, or .tftest.json) are not \
modified.

By default, fmt scans the current directory for configuration files. If you provide a \
directory for the target argument, then fmt will scan that directory instead. If you provide \
a file, then fmt will process just that file. If you provide a single dash (\"-\"), then fmt \
will read from standard input (STDIN).

The content must be in the Terraform language native syntax; JSON is not supported.";

#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Don't list files whose formatting differs with -list=false (always disabled if using
    /// STDIN).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub list: bool,
    /// Don't write to source files with -write=false (always disabled if using STDIN or
    /// -check).
    #[arg(long, default_value_t = true, value_name = "BOOL")]
    pub write: bool,
    /// Display diffs of formatting changes.
    #[arg(long)]
    pub diff: bool,
    /// Check if the input is formatted. Exit status will be 0 if all input is properly
    /// formatted, 3 if not.
    #[arg(long)]
    pub check: bool,
    /// If specified, output won't contain any color.
    #[arg(long)]
    pub no_color: bool,
    /// Also process files in subdirectories. By default, only the given directory (or current
    /// directory) is processed.
    #[arg(long)]
    pub recursive: bool,
    /// Files or directories to format (default: the current directory); `-` reads standard
    /// input.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: Shell,
}

/// A parse result: the command, plus what derive structs cannot hold (the order of `-var` and
/// `-var-file` as typed).
#[derive(Debug)]
pub struct Parsed {
    pub cli: Cli,
    pub var_order: Vec<VarArg>,
}

/// The clap `Command`, with every boolean flag accepting `=true|false`.
pub(crate) fn command() -> clap::Command {
    with_terraform_bools(Cli::command())
}

fn with_terraform_bools(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let boolish = matches!(a.get_action(), ArgAction::SetTrue)
            || (a.get_long().is_some()
                && matches!(a.get_value_names(), Some([n]) if n.as_str() == "BOOL"));
        if boolish && a.get_id() != "help" && a.get_id() != "version" {
            let default_true = a.get_default_values().first().is_some_and(|v| v == "true");
            let default = if default_true { "true" } else { "false" };
            a.action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .default_value(default)
                .value_parser(clap::builder::BoolishValueParser::new())
                .value_name("BOOL")
                .hide_possible_values(true)
                .hide_default_value(!default_true)
        } else {
            a
        }
    })
    .mut_subcommands(with_terraform_bools)
}

/// Parses a full argument vector (program name first). Terraform spellings are normalized
/// first; clap errors (including `--help` and `--version`) come back as `Err`.
pub(crate) fn parse<I, T>(args: I) -> Result<Parsed, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let cmd = command();
    let args = normalize(&cmd, args.into_iter().map(Into::into).collect());
    let matches = cmd.try_get_matches_from(args)?;
    let var_order = var_order(&matches);
    let cli = Cli::from_arg_matches(&matches)?;
    Ok(Parsed { cli, var_order })
}

/// `-var` and `-var-file` in the order they were typed, from the innermost subcommand's matches.
fn var_order(matches: &clap::ArgMatches) -> Vec<VarArg> {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    let mut items: Vec<(usize, VarArg)> = Vec::new();
    let has = |id: &str| matches!(m.try_contains_id(id), Ok(true));
    if has("var") {
        if let (Some(idx), Some(vals)) = (m.indices_of("var"), m.get_many::<String>("var")) {
            for (i, v) in idx.zip(vals) {
                items.push((i, VarArg::Var(v.clone())));
            }
        }
    }
    if has("var_file") {
        if let (Some(idx), Some(vals)) =
            (m.indices_of("var_file"), m.get_many::<PathBuf>("var_file"))
        {
            for (i, v) in idx.zip(vals) {
                items.push((i, VarArg::File(v.clone())));
            }
        }
    }
    items.sort_by_key(|(i, _)| *i);
    items.into_iter().map(|(_, v)| v).collect()
}

/// What the normalizer knows about one command level: its long flags, and whether each takes
/// a separate value (`--var k=v`) or not.
#[derive(Default)]
struct FlagTable {
    /// long name → takes a value as the next argument when written without `=`.
    longs: BTreeMap<String, bool>,
}

impl FlagTable {
    fn add(&mut self, cmd: &clap::Command, globals_only: bool) {
        for a in cmd.get_arguments() {
            if globals_only && !a.is_global_set() {
                continue;
            }
            if let Some(long) = a.get_long() {
                let takes_value = a.get_action().takes_values()
                    && !a.is_require_equals_set()
                    && a.get_num_args().is_none_or(|n| n.min_values() > 0);
                self.longs.insert(long.to_string(), takes_value);
                for alias in a.get_all_aliases().into_iter().flatten() {
                    self.longs.insert(alias.to_string(), takes_value);
                }
            }
        }
        if !globals_only {
            // clap's generated flags are not in `get_arguments` before the command is built.
            self.longs.entry("help".into()).or_insert(false);
            if cmd.get_version().is_some() || cmd.is_propagate_version_set() {
                self.longs.entry("version".into()).or_insert(false);
            }
        }
    }
}

/// Rewrites Terraform's single-dash long flags to clap's `--long` form. See the module docs for
/// the rules; `args[0]` is the program name and is kept.
pub(crate) fn normalize(root: &clap::Command, args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.into_iter();
    if let Some(prog) = iter.next() {
        out.push(prog);
    }
    // The chain of commands we are in: the flags of each level, and the globals of ancestors.
    let mut path: Vec<&clap::Command> = vec![root];
    let mut table = table_for(&path);
    let mut value_next = false;
    let mut rest_literal = false;
    for arg in iter {
        if rest_literal || value_next {
            value_next = false;
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            rest_literal = true;
            out.push(arg);
            continue;
        }
        if let Some(body) = s.strip_prefix("--") {
            let name = body.split_once('=').map_or(body, |(n, _)| n);
            value_next = !body.contains('=') && table.longs.get(name).copied().unwrap_or(false);
            out.push(arg);
            continue;
        }
        if let Some(body) = s.strip_prefix('-') {
            let name = body.split_once('=').map_or(body, |(n, _)| n);
            if name.chars().count() >= 2 {
                if let Some(&takes) = table.longs.get(name) {
                    value_next = !body.contains('=') && takes;
                    out.push(OsString::from(format!("-{s}")));
                    continue;
                }
                // An unknown long flag: keep it whole so clap names it (and suggests the
                // nearest real flag) instead of reading it as a cluster of short flags.
                if name.starts_with(|c: char| c.is_ascii_alphabetic())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    out.push(OsString::from(format!("-{s}")));
                    continue;
                }
            }
            out.push(arg);
            continue;
        }
        // A positional argument: maybe a subcommand.
        let current = path.last().copied().unwrap_or(root);
        if let Some(sub) = current
            .get_subcommands()
            .find(|c| c.get_name() == s || c.get_all_aliases().any(|a| a == s))
        {
            path.push(sub);
            table = table_for(&path);
        }
        out.push(arg);
    }
    out
}

fn table_for(path: &[&clap::Command]) -> FlagTable {
    let mut t = FlagTable::default();
    for (i, c) in path.iter().enumerate() {
        t.add(c, i + 1 < path.len());
    }
    t
}

/// Parses a Go-style duration: `0`, `500ms`, `5s`, `1m30s`, `1.5h`, `2h45m`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let bad = || format!("invalid duration {s:?}: expected a number and a unit, like 5s or 1m30s");
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += n * factor;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(line: &str) -> String {
        let args: Vec<OsString> = std::iter::once("cairn")
            .chain(line.split(' '))
            .map(OsString::from)
            .collect();
        normalize(&command(), args)
            .into_iter()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn single_dash_long_flags_become_double_dash() {
        for (input, expected) in [
            ("plan -json -no-color", "plan --json --no-color"),
            ("-chdir=dir plan", "--chdir=dir plan"),
            ("plan -var k=-1 -var -json", "plan --var k=-1 --var -json"),
            (
                "plan -var=k=v -refresh=false",
                "plan --var=k=v --refresh=false",
            ),
            ("plan -out plan.bin -h", "plan --out plan.bin -h"),
            (
                "apply -auto-approve -lock-timeout=5s",
                "apply --auto-approve --lock-timeout=5s",
            ),
            ("state show -at=3 -x", "state show --at=3 -x"),
            ("output -raw name", "output --raw name"),
            ("graph -type=apply", "graph --type=apply"),
            ("plan -- -json", "plan -- -json"),
            ("version -out", "version --out"),
            ("plan -unknown-flag", "plan --unknown-flag"),
            ("plan -var -5", "plan --var -5"),
            ("--version", "--version"),
            ("plan -help", "plan --help"),
            ("state rm -state-dir d a.b", "state rm --state-dir d a.b"),
        ] {
            assert_eq!(norm(input), expected, "{input}");
        }
    }

    fn parse_line(line: &str) -> Result<Parsed, String> {
        parse(std::iter::once("cairn").chain(line.split(' '))).map_err(|e| e.to_string())
    }

    #[test]
    fn terraform_spellings_parse() {
        let p = parse_line(
            "-chdir=x plan -var a=1 -var-file=f.tfvars -var b=-2 -refresh=false -parallelism=3 \
             -target=sim_thing.a -target sim_thing.b -detailed-exitcode -lock-timeout=1m30s",
        )
        .unwrap();
        assert_eq!(p.cli.chdir, Some(PathBuf::from("x")));
        let Command::Plan(a) = p.cli.command else {
            panic!("not plan")
        };
        assert!(!a.plan.refresh);
        assert!(a.detailed_exitcode);
        assert_eq!(a.walk.parallelism, 3);
        assert_eq!(a.walk.target, ["sim_thing.a", "sim_thing.b"]);
        assert_eq!(a.walk.lock_timeout, Duration::from_secs(90));
        assert_eq!(
            p.var_order,
            [
                VarArg::Var("a=1".into()),
                VarArg::File("f.tfvars".into()),
                VarArg::Var("b=-2".into()),
            ]
        );
    }

    #[test]
    fn defaults_and_bool_values() {
        let p = parse_line("plan").unwrap();
        let Command::Plan(a) = p.cli.command else {
            panic!("not plan")
        };
        assert!(a.plan.refresh && a.walk.input && !a.walk.ui.json && !a.destroy);
        assert_eq!(a.walk.parallelism, 10);
        let p = parse_line("apply -json=true -auto-approve=false -refresh plan.bin").unwrap();
        let Command::Apply(a) = p.cli.command else {
            panic!("not apply")
        };
        assert!(a.walk.ui.json && !a.auto_approve && a.plan.refresh);
        assert_eq!(a.plan_file, Some(PathBuf::from("plan.bin")));
        assert!(parse_line("plan -refresh=maybe").is_err());
    }

    #[test]
    fn durations() {
        for (s, secs) in [
            ("0", 0.0),
            ("5s", 5.0),
            ("1m30s", 90.0),
            ("1.5h", 5400.0),
            ("250ms", 0.25),
            ("2h45m", 9900.0),
        ] {
            assert_eq!(parse_duration(s), Ok(Duration::from_secs_f64(secs)), "{s}");
        }
        for s in ["", "5", "s", "5x", "1m30"] {
            assert!(parse_duration(s).is_err(), "{s}");
        }
    }
}
