//! What the deployment configuration evaluates at run time: deployment groups'
//! `deployment_auto_approve` checks over a round's plans (HCP Terraform's `context`), and
//! `publish_output` values over the deployments' outputs. Both see the deployment file's
//! `locals` (evaluated when the stack is loaded, with its stores and upstream inputs).

use crate::config::stack::StackModel;
use crate::diag::FileId;
use crate::eval::{Scope as EvalScope, ScopeError, Subject};
use crate::plan::Plan;
use crate::value::{Value, ValueMap};
use cairn_state::quote;
use hcl_edit::expr::Expression;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How a deployment's plans in a round fare against its deployment group's
/// `auto_approve_checks` (HCP Terraform's deployment groups).
pub enum AutoApproval {
    /// No `deployment_group`: its default group, whose only rule is `empty_plan` (a plan
    /// without changes needs no approval; one with changes is asked for).
    Default,
    /// Every check of every rule of its group passed.
    Approved { group: String },
    /// Some checks failed: each `deployment_auto_approve.NAME: REASON`.
    Refused { group: String, reasons: Vec<String> },
}

/// What a check's `context` is made of besides the plans themselves.
pub(crate) struct PlanFacts {
    /// No component instance of the plans failed (`context.success`).
    pub(crate) success: bool,
    /// Component instances deferred to a later round (`context.plan.changes.defer`).
    pub(crate) deferred: usize,
    /// The rounds so far, this one included (`context.plan.replans` is one less).
    pub(crate) rounds: usize,
}

/// A deployment's group and the checks of its rules, apart from the stack (a runner's
/// tasks judge their plans with them).
#[derive(Clone)]
pub(crate) struct GroupRules {
    deployment: String,
    group: Option<String>,
    dir: PathBuf,
    /// The deployment file's locals.
    locals: BTreeMap<String, Value>,
    /// Every deployment's name.
    deployments: Vec<String>,
    /// (rule, file, condition, reason).
    checks: Vec<(String, FileId, Expression, Expression)>,
}

pub(crate) fn group_rules(model: &StackModel, deployment: &str) -> GroupRules {
    let group = model
        .deployments
        .get(deployment)
        .and_then(|d| d.group.clone());
    let mut checks = Vec::new();
    if let Some(g) = &group {
        for rule in model.groups.get(g).into_iter().flatten() {
            for (file, cond, reason) in model.auto_approves.get(rule).into_iter().flatten() {
                checks.push((rule.clone(), *file, cond.clone(), reason.clone()));
            }
        }
    }
    GroupRules {
        deployment: deployment.to_string(),
        group,
        dir: model.dir.clone(),
        locals: model.deploy_locals.clone(),
        deployments: model.deployments.keys().cloned().collect(),
        checks,
    }
}

/// A deployment as a check sees it (`deployment.NAME`, `context.plan.deployment`).
fn deployment_value(name: &str) -> Value {
    Value::object([("name".to_string(), Value::string(name))])
}

/// The changes of some plans, summed, as `context.plan.changes` shows them.
fn counts(plans: &[&Plan], deferred: usize) -> Value {
    let (mut add, mut change, mut remove, mut import, mut moves, mut forget) = (0, 0, 0, 0, 0, 0);
    for p in plans {
        let (a, c, r) = p.counts();
        add += a;
        change += c;
        remove += r;
        import += p.imports();
        moves += p.moves.len();
        forget += p
            .changes
            .iter()
            .filter(|c| c.action == crate::plan::Action::Forget)
            .count();
    }
    let n = |x: usize| Value::int(x as i64);
    Value::object([
        ("add".to_string(), n(add)),
        ("change".to_string(), n(change)),
        ("import".to_string(), n(import)),
        ("remove".to_string(), n(remove)),
        ("move".to_string(), n(moves)),
        ("forget".to_string(), n(forget)),
        ("defer".to_string(), n(deferred)),
        (
            "total".to_string(),
            n(add + change + import + remove + moves + forget + deferred),
        ),
    ])
}

impl GroupRules {
    /// Judges plans (each with its component) against the rules. A check's `context` is
    /// HCP Terraform's: `context.plan` has `applyable` (the plans succeeded and change
    /// something), `changes` (`add`, `change`, `import`, `remove`, `move`, `forget`,
    /// `defer` — component instances deferred to a later round — and `total`, summed over
    /// the plans), `component_changes["component.NAME"]` (the same per component),
    /// `replans` (rounds before this one) and `deployment` (equal to `deployment.NAME` of
    /// the deployment planned); `context.success` is whether planning succeeded. A check
    /// may also refer to the deployment file's `local`s and to `deployment.NAME` (an
    /// object with the deployment's `name`).
    pub(crate) fn judge(&self, plans: &[(&str, &Plan)], facts: &PlanFacts) -> AutoApproval {
        let Some(group) = self.group.clone() else {
            return AutoApproval::Default;
        };
        let all: Vec<&Plan> = plans.iter().map(|(_, p)| *p).collect();
        let mut by_component: BTreeMap<String, Vec<&Plan>> = BTreeMap::new();
        for (c, p) in plans {
            by_component
                .entry(format!("component.{c}"))
                .or_default()
                .push(p);
        }
        let applyable = facts.success && all.iter().any(|p| p.applyable);
        let context = Value::object([
            (
                "plan".to_string(),
                Value::object([
                    ("applyable".to_string(), Value::Bool(applyable)),
                    ("changes".to_string(), counts(&all, facts.deferred)),
                    (
                        "component_changes".to_string(),
                        Value::object(
                            by_component
                                .iter()
                                .map(|(c, ps)| (c.clone(), counts(ps, 0))),
                        ),
                    ),
                    (
                        "replans".to_string(),
                        Value::int(facts.rounds.saturating_sub(1) as i64),
                    ),
                    ("deployment".to_string(), deployment_value(&self.deployment)),
                ]),
            ),
            ("success".to_string(), Value::Bool(facts.success)),
        ]);
        let mut reasons = Vec::new();
        for (rule, file, cond, reason) in &self.checks {
            let scope = DeployFileScope {
                file: *file,
                dir: &self.dir,
                locals: &self.locals,
                deployments: Deployments::Names(&self.deployments),
                context: Some(&context),
            };
            let passed = match crate::eval::eval(cond, &scope) {
                Ok(v) => matches!(v.unmarked(), Value::Bool(true)),
                Err(d) => {
                    reasons.push(format!(
                        "deployment_auto_approve.{rule}: its condition cannot be evaluated ({})",
                        d.iter()
                            .map(|d| format!("{}: {}", d.summary, d.detail))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                    continue;
                }
            };
            if passed {
                continue;
            }
            let why = match crate::eval::eval(reason, &scope) {
                Ok(v) => match v.unmarked().as_str() {
                    Some(s) => s.to_string(),
                    None => crate::value::format_hcl(&v),
                },
                Err(_) => "its condition is false".to_string(),
            };
            reasons.push(format!("deployment_auto_approve.{rule}: {why}"));
        }
        if reasons.is_empty() {
            AutoApproval::Approved { group }
        } else {
            AutoApproval::Refused { group, reasons }
        }
    }
}

/// What `deployment.NAME` is where a deployment file's expression is evaluated.
pub(super) enum Deployments<'a> {
    /// A `publish_output`'s value: each deployment's stack outputs.
    Outputs(&'a ValueMap),
    /// An auto-approve check: each deployment itself (see [`deployment_value`]).
    Names(&'a [String]),
}

/// Where a deployment file's expression is evaluated after the stack is loaded: its
/// `local`s, `deployment.NAME`, and in a check, `context`.
pub(super) struct DeployFileScope<'a> {
    pub(super) file: FileId,
    pub(super) dir: &'a Path,
    pub(super) locals: &'a BTreeMap<String, Value>,
    pub(super) deployments: Deployments<'a>,
    pub(super) context: Option<&'a Value>,
}

impl EvalScope for DeployFileScope<'_> {
    fn resolve(&self, subject: &Subject) -> Result<Value, ScopeError> {
        match subject {
            Subject::Local(n) => self.locals.get(n).cloned().ok_or_else(|| {
                ScopeError::new(
                    "Reference to undeclared local value",
                    format!(
                        "The deployment configuration declares no local value named {}.",
                        quote(n)
                    ),
                )
            }),
            Subject::Resource { type_, name, .. } if type_ == "deployment" => {
                let undeclared = || {
                    ScopeError::new(
                        "Reference to undeclared deployment",
                        format!("The stack declares no deployment named {}.", quote(name)),
                    )
                };
                match &self.deployments {
                    Deployments::Outputs(m) => m.get(name).cloned().ok_or_else(undeclared),
                    Deployments::Names(n) if n.contains(name) => Ok(deployment_value(name)),
                    Deployments::Names(_) => Err(undeclared()),
                }
            }
            Subject::Resource { type_, name, .. } if type_ == "context" => match self.context {
                Some(c) => c.get(name).cloned().ok_or_else(|| {
                    ScopeError::new(
                        "Unsupported attribute",
                        format!(
                            "The context of an auto-approve check has no attribute {}: it has \
                             context.plan and context.success.",
                            quote(name)
                        ),
                    )
                }),
                None => Err(ScopeError::new(
                    "Invalid reference",
                    "context is the plan an auto-approve check judges: only a check may refer \
                     to it.",
                )),
            },
            _ => Err(ScopeError::new(
                "Invalid reference",
                match self.context {
                    Some(_) => {
                        "An auto-approve check may refer to context, the deployment \
                         configuration's locals and deployment.NAME."
                    }
                    None => {
                        "A publish_output value may refer to the deployments' outputs \
                         (deployment.NAME.OUTPUT) and the deployment configuration's locals."
                    }
                },
            )),
        }
    }
    fn file(&self) -> FileId {
        self.file
    }
    fn module_dir(&self) -> &Path {
        self.dir
    }
    fn root_dir(&self) -> &Path {
        self.dir
    }
}
