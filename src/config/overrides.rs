//! Override files (`override.tf`, `*_override.tf` and their `.tf.json` forms), merged into the
//! blocks of the primary files as Terraform merges them.
//!
//! A `resource`, `data`, `variable`, `output`, `module` or `provider` block of an override
//! file merges into the primary block of the same name (an override with no such block is an
//! error): each argument replaces the primary's; a nested block type replaces every primary
//! block of that type, except `lifecycle`, whose arguments merge one by one. Several override
//! files apply in name order. `locals` entries and `terraform` settings merge by name in the
//! loader (`Loader::override_rest`), where the decoded model is at hand.
//!
//! The merge is made on text: each merged block is written out again from the pieces of
//! source it is made of, into one text per module whose origins (`SourceMap::add_rewritten`)
//! point into the primary and override files, and parsed like any file. So every span of a
//! merged block, and every diagnostic about it, points where that piece was written.

use crate::diag::{FileId, SourceMap, Span};
use hcl_edit::structure::{Block, Body, Structure};
use hcl_edit::Span as _;

/// A piece of source text: a byte range of a file of the map.
#[derive(Debug, Clone, Copy)]
struct Src {
    file: FileId,
    start: usize,
    end: usize,
}

/// A block as pieces: its header and its items.
#[derive(Debug, Clone)]
struct MBlock {
    header: Src,
    items: Vec<Item>,
}

#[derive(Debug, Clone)]
enum Item {
    Attr(String, Src),
    Block(String, MBlock),
}

impl MBlock {
    fn of(file: FileId, b: &Block) -> MBlock {
        let start = b.ident.span().map_or(0, |r| r.start);
        let end = b
            .labels
            .last()
            .and_then(|l| l.span())
            .or(b.ident.span())
            .map_or(start, |r| r.end);
        let items = b
            .body
            .iter()
            .filter_map(|s| match s {
                Structure::Attribute(a) => a.span().map(|r| {
                    Item::Attr(
                        a.key.as_str().to_string(),
                        Src {
                            file,
                            start: r.start,
                            end: r.end,
                        },
                    )
                }),
                Structure::Block(nb) => Some(Item::Block(
                    nb.ident.as_str().to_string(),
                    MBlock::of(file, nb),
                )),
            })
            .collect();
        MBlock {
            header: Src { file, start, end },
            items,
        }
    }

    /// Merges `over` into this block (see the module docs).
    fn merge(&mut self, over: MBlock) {
        let mut replaced: Vec<String> = Vec::new();
        for item in over.items {
            match item {
                Item::Attr(name, src) => {
                    self.items
                        .retain(|i| !matches!(i, Item::Attr(n, _) if *n == name));
                    self.items.push(Item::Attr(name, src));
                }
                Item::Block(kind, b) if kind == "lifecycle" => {
                    let existing = self.items.iter_mut().find_map(|i| match i {
                        Item::Block(k, mb) if *k == kind => Some(mb),
                        _ => None,
                    });
                    match existing {
                        Some(mb) => mb.merge(b),
                        None => self.items.push(Item::Block(kind, b)),
                    }
                }
                Item::Block(kind, b) => {
                    if !replaced.contains(&kind) {
                        self.items
                            .retain(|i| !matches!(i, Item::Block(k, _) if *k == kind));
                        replaced.push(kind.clone());
                    }
                    self.items.push(Item::Block(kind, b));
                }
            }
        }
    }

    fn write(&self, sources: &SourceMap, out: &mut Writer) {
        out.piece(sources, self.header);
        out.text.push_str(" {\n");
        for i in &self.items {
            match i {
                Item::Attr(_, src) => {
                    out.piece(sources, *src);
                    out.text.push('\n');
                }
                Item::Block(_, b) => b.write(sources, out),
            }
        }
        out.text.push_str("}\n");
    }
}

#[derive(Default)]
struct Writer {
    text: String,
    origins: Vec<(usize, FileId, usize)>,
}

impl Writer {
    fn piece(&mut self, sources: &SourceMap, src: Src) {
        self.origins.push((self.text.len(), src.file, src.start));
        let text = sources.text(src.file);
        self.text
            .push_str(text.get(src.start..src.end).unwrap_or_default());
    }
}

/// The merged blocks as one text, with its origins (`SourceMap::add_rewritten`) and whether
/// any piece is JSON.
pub(super) type MergedText = (String, Vec<(usize, FileId, usize)>, bool);

/// What `merge` leaves to the loader.
pub(super) struct Merged {
    pub(crate) text: Option<MergedText>,
    /// Problems: span, summary, detail.
    pub(crate) errors: Vec<(Span, &'static str, String)>,
    /// Every other structure of the override files (`locals`, `terraform`, …), by file.
    pub(crate) rest: Vec<(FileId, Body)>,
}

/// The identity of a mergeable block: type, labels and (for `provider`) alias.
fn key(b: &Block) -> Option<(String, Vec<String>, Option<String>)> {
    let kind = b.ident.as_str();
    if !matches!(
        kind,
        "resource" | "data" | "variable" | "output" | "module" | "provider"
    ) {
        return None;
    }
    let labels = b.labels.iter().map(|l| l.as_str().to_string()).collect();
    let alias = match kind {
        "provider" => b.body.get_attribute("alias").and_then(|a| match &a.value {
            hcl_edit::expr::Expression::String(s) => Some(s.value().clone()),
            _ => None,
        }),
        _ => None,
    };
    Some((kind.to_string(), labels, alias))
}

/// Merges the override files' blocks into the primary files' (see the module docs): merged
/// blocks leave `primary` and come back in `Merged::text`.
pub(super) fn merge(
    primary: &mut [(FileId, Body)],
    overrides: Vec<(FileId, Body)>,
    sources: &SourceMap,
) -> Merged {
    type Key = (String, Vec<String>, Option<String>);
    let mut merged: Vec<(Key, MBlock)> = Vec::new();
    let mut errors = Vec::new();
    let mut rest = Vec::new();
    for (ofile, obody) in overrides {
        let mut others = Body::new();
        for s in obody {
            let b = match s {
                Structure::Block(b) => b,
                other => {
                    others.push(other);
                    continue;
                }
            };
            let Some(k) = key(&b) else {
                others.push(b);
                continue;
            };
            let over = MBlock::of(ofile, &b);
            if let Some((_, m)) = merged.iter_mut().find(|(mk, _)| *mk == k) {
                m.merge(over);
                continue;
            }
            let found = primary.iter_mut().find_map(|(pfile, pbody)| {
                let i = pbody.iter().position(|s| match s {
                    Structure::Block(pb) => key(pb).as_ref() == Some(&k),
                    _ => false,
                })?;
                match pbody.remove(i) {
                    Structure::Block(pb) => Some(MBlock::of(*pfile, &pb)),
                    _ => None,
                }
            });
            match found {
                Some(mut base) => {
                    base.merge(over);
                    merged.push((k, base));
                }
                None => {
                    let h = over.header;
                    errors.push((
                        Span {
                            file: h.file,
                            start: h.start,
                            end: h.end,
                        },
                        missing_summary(&k.0),
                        missing_detail(&k),
                    ));
                }
            }
        }
        rest.push((ofile, others));
    }
    let text = (!merged.is_empty()).then(|| {
        let mut w = Writer::default();
        let mut json = false;
        for (_, m) in &merged {
            json |= sources.is_json(m.header.file);
            m.write(sources, &mut w);
        }
        (w.text, w.origins, json)
    });
    Merged { text, errors, rest }
}

fn missing_summary(kind: &str) -> &'static str {
    match kind {
        "resource" => "Missing resource to override",
        "data" => "Missing data resource to override",
        "variable" => "Missing base variable declaration to override",
        "output" => "Missing base output definition to override",
        "module" => "Missing module call to override",
        _ => "Missing base provider configuration for override",
    }
}

fn missing_detail((kind, labels, alias): &(String, Vec<String>, Option<String>)) -> String {
    let q = crate::addr::quote;
    let label = |i: usize| labels.get(i).cloned().unwrap_or_default();
    match kind.as_str() {
        "resource" => format!(
            "There is no {} resource named {}. An override file can only override a resource \
             block defined in a primary configuration file.",
            label(0),
            q(&label(1))
        ),
        "data" => format!(
            "There is no {} data resource named {}. An override file can only override a data \
             block defined in a primary configuration file.",
            label(0),
            q(&label(1))
        ),
        "variable" => format!(
            "There is no variable named {}. An override file can only override a variable \
             that was already declared in a primary configuration file.",
            q(&label(0))
        ),
        "output" => format!(
            "There is no output named {}. An override file can only override an output that \
             was already defined in a primary configuration file.",
            q(&label(0))
        ),
        "module" => format!(
            "There is no module call named {}. An override file can only override a module \
             call that was defined in a primary configuration file.",
            q(&label(0))
        ),
        _ => match alias {
            Some(a) => format!(
                "There is no {} provider configuration with the alias {}. An override file \
                 can only override an aliased provider configuration that was already defined \
                 in a primary configuration file.",
                label(0),
                q(a)
            ),
            None => format!(
                "There is no {} provider configuration to override. An override file can only \
                 override a provider configuration that was already defined in a primary \
                 configuration file.",
                label(0)
            ),
        },
    }
}

/// Whether a file name is an override file's.
pub(super) fn is_override(name: &str) -> bool {
    let stem = name
        .strip_suffix(".tf.json")
        .or_else(|| name.strip_suffix(".tf"))
        .unwrap_or(name);
    stem == "override" || stem.ends_with("_override")
}
