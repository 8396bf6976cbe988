//! The rules of moving objects between addresses: one function for `cairn state mv` and for
//! the configuration's `moved` blocks (the engine), so both move the same way. Nothing here
//! changes the state: the caller records a `ResourceMoved` event per move.

use crate::addr::{ModulePath, ResourceAddr, ResourceInstanceAddr, Target};
use crate::snapshot::Snapshot;

/// What a move from one address to another does to a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MovePlan {
    /// Each instance that moves and where to, in address order.
    pub moves: Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>,
    /// Moves that cannot happen because an object already is at the destination (and does
    /// not itself move away in this plan).
    pub blocked: Vec<(ResourceInstanceAddr, ResourceInstanceAddr)>,
    /// How many instances the source matched (a move to the same address matches and does
    /// nothing).
    pub(crate) matched: usize,
}

impl MovePlan {
    /// True when nothing in the state matched the move's source.
    pub fn is_empty(&self) -> bool {
        self.matched == 0
    }
}

/// A move that cannot be planned at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveError {
    /// An object keeps its mode and resource type.
    TypeMismatch {
        from: ResourceAddr,
        to: ResourceAddr,
    },
    /// A whole resource whose instances have keys cannot become one instance.
    KeyedToInstance {
        from: Target,
        to: Target,
        count: usize,
    },
    /// A module moves to a module, a resource (or instance) to a resource (or instance).
    DifferentKinds { from: Target, to: Target },
}

impl std::fmt::Display for MoveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MoveError::TypeMismatch { from, to } => write!(
                f,
                "{from} cannot move to {to}: an object keeps its mode and resource type."
            ),
            MoveError::KeyedToInstance { from, to, count } => write!(
                f,
                "{from} has {count} instance(s) with keys; move them one at a time to {to}."
            ),
            MoveError::DifferentKinds { from, to } => write!(
                f,
                "{from} and {to} are different kinds of address: move a module to a module and a resource to a resource."
            ),
        }
    }
}

impl Snapshot {
    /// Where each instance (managed or data) matched by `from` goes when moved to `to`.
    /// Nothing matched is an empty plan, not an error (`state mv` reports it; a `moved` block
    /// whose source is not in the state is ignored, as in Terraform). A module moved to a
    /// module keeps the instance key of the call it names when neither address gives one
    /// (`module.a` → `module.b` moves `module.a[0]` to `module.b[0]`).
    /// (The error is boxed: addresses are large, and it is rare.)
    pub fn plan_moves(&self, from: &Target, to: &Target) -> Result<MovePlan, Box<MoveError>> {
        let mut matched: Vec<&ResourceInstanceAddr> = match from {
            // One instance: looked up, not searched for.
            Target::Instance(i) => self
                .resources
                .get_key_value(i)
                .map(|(k, _)| k)
                .or_else(|| self.data.get_key_value(i).map(|(k, _)| k))
                .into_iter()
                .collect(),
            _ => self
                .resources
                .keys()
                .chain(self.data.keys())
                .filter(|a| from.contains(a))
                .collect(),
        };
        matched.sort();
        if matched.is_empty() {
            return Ok(MovePlan::default());
        }
        let same_kind = |a: &ResourceAddr, b: &ResourceAddr| {
            if a.mode != b.mode || a.type_ != b.type_ {
                Err(Box::new(MoveError::TypeMismatch {
                    from: a.clone(),
                    to: b.clone(),
                }))
            } else {
                Ok(())
            }
        };
        let count = matched.len();
        let mut moves = Vec::new();
        match (from, to) {
            (Target::Module(fm), Target::Module(tm)) => {
                for a in matched {
                    let module = &a.resource.module.0;
                    let mut steps = tm.0.clone();
                    if let (Some(f), Some(t), Some(src)) =
                        (fm.0.last(), steps.last_mut(), module.get(fm.0.len() - 1))
                    {
                        if f.key.is_none() && t.key.is_none() {
                            t.key = src.key.clone();
                        }
                    }
                    steps.extend_from_slice(&module[fm.0.len()..]);
                    let mut dest = a.clone();
                    dest.resource.module = ModulePath(steps);
                    moves.push((a.clone(), dest));
                }
            }
            (Target::Resource(fr), Target::Resource(tr)) => {
                same_kind(fr, tr)?;
                for a in matched {
                    moves.push((a.clone(), tr.instance(a.key.clone())));
                }
            }
            (Target::Instance(fi), Target::Instance(ti)) => {
                same_kind(&fi.resource, &ti.resource)?;
                moves.push((fi.clone(), ti.clone()));
            }
            (Target::Instance(fi), Target::Resource(tr)) => {
                same_kind(&fi.resource, tr)?;
                moves.push((fi.clone(), tr.instance(None)));
            }
            (Target::Resource(fr), Target::Instance(ti)) => {
                same_kind(fr, &ti.resource)?;
                if matched.len() != 1 || matched[0].key.is_some() {
                    return Err(Box::new(MoveError::KeyedToInstance {
                        from: from.clone(),
                        to: to.clone(),
                        count: matched.len(),
                    }));
                }
                moves.push((matched[0].clone(), ti.clone()));
            }
            _ => {
                return Err(Box::new(MoveError::DifferentKinds {
                    from: from.clone(),
                    to: to.clone(),
                }))
            }
        }
        moves.retain(|(src, dest)| src != dest);
        let occupied = |dest: &ResourceInstanceAddr| {
            self.resources.contains_key(dest) || self.data.contains_key(dest)
        };
        let (blocked, moves): (Vec<_>, Vec<_>) = moves
            .iter()
            .cloned()
            .partition(|(_, dest)| occupied(dest) && !moves.iter().any(|(s, _)| s == dest));
        Ok(MovePlan {
            moves,
            blocked,
            matched: count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(addrs: &[&str]) -> Snapshot {
        let mut s = Snapshot::default();
        for a in addrs {
            let provider = crate::event::ProviderRef::new(
                crate::addr::ProviderAddr {
                    module: ModulePath::root(),
                    package: "x".into(),
                    alias: None,
                    key: None,
                },
                "p".into(),
            );
            let object = crate::event::DataObject {
                attrs: crate::stored_value::StoredValue::Null,
                provider,
            };
            s.data.insert(a.parse().unwrap(), object);
        }
        s
    }

    fn t(s: &str) -> Target {
        s.parse().unwrap()
    }

    #[test]
    fn a_module_call_keeps_its_instance_keys() {
        let s = snap(&["module.a[0].data.x.y", "module.a[1].data.x.y"]);
        let p = s.plan_moves(&t("module.a"), &t("module.b")).unwrap();
        let got: Vec<String> = p.moves.iter().map(|(_, d)| d.to_string()).collect();
        assert_eq!(got, ["module.b[0].data.x.y", "module.b[1].data.x.y"]);
    }

    #[test]
    fn an_occupied_destination_blocks_the_move_unless_it_moves_too() {
        let s = snap(&["data.x.a", "data.x.b"]);
        let p = s.plan_moves(&t("data.x.a"), &t("data.x.b")).unwrap();
        assert!(p.moves.is_empty());
        assert_eq!(p.blocked.len(), 1);
        let p = s.plan_moves(&t("data.y.a"), &t("data.y.b")).unwrap();
        assert!(p.is_empty());
    }
}
