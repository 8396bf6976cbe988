//! Body evaluation: a resource's (or provider's) arguments and nested blocks, `dynamic` blocks
//! included, into one object value — checked against the provider's schema when there is one.
//!
//! With a schema: unknown arguments and blocks are errors (with "did you mean"), missing
//! required arguments are errors, values are converted to the attribute's type, absent
//! attributes are typed nulls (computed ones included: the provider fills those), block counts
//! are checked against `min_items`/`max_items`. Without a schema (inspecting a type no provider
//! describes) the body is taken as written: blocks become tuples of objects.

use super::expr::Evaluator;
use super::suggest;
use super::Scope;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::schema::{Block as SchemaBlock, Nesting};
use crate::value::ValueMap;
use crate::value::{Type, Value};
use cairn_state::quote;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Block, Body, Structure};
use hcl_edit::Span as _;
use std::collections::BTreeMap;

/// Evaluates a body into an object value (see the module docs).
pub fn eval_body(
    body: &Body,
    schema: Option<&SchemaBlock>,
    scope: &dyn Scope,
) -> Result<Value, Diagnostics> {
    eval_block_body(body, schema, scope, None)
}

/// Where each part of an evaluated body was written, by its path in the value (the paths of
/// `Value::unknown_paths`): every argument (`name`, `ingress[0].cidr_blocks`), every nested
/// block (`ingress[0]`; the bare `ingress` is the first block of that type), and inside a
/// `dynamic` block's elements the arguments of its `content` (`ingress[1].from_port`), with
/// the `dynamic` block as the element's own location. Paths follow the value's order: a set
/// of blocks is in the set's canonical order.
pub type Sources = Vec<(String, Span)>;

/// `eval_body`, also giving where each argument and block is written (`Sources`).
pub fn eval_body_with_sources(
    body: &Body,
    schema: Option<&SchemaBlock>,
    scope: &dyn Scope,
    json: bool,
) -> Result<(Value, Sources), Diagnostics> {
    let mut ev = Evaluator::new(scope);
    let mut b = BodyEval {
        ev: &mut ev,
        file: scope.file(),
        diags: Diagnostics::new(),
        json,
        sources: Some(Vec::new()),
    };
    let header = body.span().map(|r| Span {
        file: scope.file(),
        start: r.start,
        end: r.start + 1,
    });
    let v = b.body(body, schema, header);
    if b.diags.is_empty() {
        Ok((v, b.sources.unwrap_or_default()))
    } else {
        Err(b.diags)
    }
}

/// `eval_body`, with the span of the block's header for "missing argument" errors.
pub fn eval_block_body(
    body: &Body,
    schema: Option<&SchemaBlock>,
    scope: &dyn Scope,
    header: Option<Span>,
) -> Result<Value, Diagnostics> {
    eval_config_body(body, schema, scope, header, false)
}

/// `eval_block_body` for a body that may come from a `.tf.json` file (`json`): there, an
/// argument named like a nested block type of the schema holds that block (a JSON object) or
/// those blocks (an array of objects), as Terraform decodes JSON bodies with the schema
/// (`config::json_syntax` cannot tell them apart without it).
pub fn eval_config_body(
    body: &Body,
    schema: Option<&SchemaBlock>,
    scope: &dyn Scope,
    header: Option<Span>,
    json: bool,
) -> Result<Value, Diagnostics> {
    let mut ev = Evaluator::new(scope);
    let mut b = BodyEval {
        ev: &mut ev,
        file: scope.file(),
        diags: Diagnostics::new(),
        json,
        sources: None,
    };
    // Without a header, "missing argument" errors point at the body's opening brace.
    let header = header.or_else(|| {
        body.span().map(|r| Span {
            file: scope.file(),
            start: r.start,
            end: r.start + 1,
        })
    });
    let v = b.body(body, schema, header);
    if b.diags.is_empty() {
        Ok(v)
    } else {
        Err(b.diags)
    }
}

/// The blocks a JSON argument stands for (see `eval_config_body`): one per object, of the
/// schema's block type; `None` when the value is not known yet.
fn json_blocks(
    name: &str,
    v: Value,
    nb: &crate::schema::NestedBlock,
) -> Result<Option<Vec<Value>>, (&'static str, String)> {
    let (v, sensitive) = match v {
        Value::Sensitive(inner) => (*inner, true),
        v => (v, false),
    };
    let items = match v {
        Value::Unknown(_) => return Ok(None),
        Value::Null(_) => Vec::new(),
        Value::Object(_) | Value::Map(_) => vec![v],
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => items,
        _ => {
            return Err((
                "Incorrect JSON value type",
                format!(
                    "Either a JSON object or a JSON array is required, representing the \
                     contents of one or more {} blocks.",
                    quote(name)
                ),
            ))
        }
    };
    let mut out = Vec::new();
    for item in items {
        let Some(b) = json_block(item, &nb.block)? else {
            return Ok(None);
        };
        out.push(if sensitive { b.sensitive() } else { b });
    }
    Ok(Some(out))
}

/// One block's value from a JSON object: its arguments converted to the schema's types and
/// its nested blocks decoded the same way; `None` when it is not known yet.
fn json_block(v: Value, schema: &SchemaBlock) -> Result<Option<Value>, (&'static str, String)> {
    let obj = match v {
        Value::Object(o) | Value::Map(o) => o,
        Value::Unknown(_) => return Ok(None),
        _ => {
            return Err((
                "Incorrect JSON value type",
                "A JSON object is required here, to define arguments and child blocks.".into(),
            ))
        }
    };
    let mut out = ValueMap::new();
    for (k, v) in obj {
        if let Some(attr) = schema.attributes.get(&k) {
            let v = super::convert::convert(v, &attr.ty).map_err(|e| {
                (
                    "Incorrect attribute value type",
                    format!("Inappropriate value for attribute {}: {e}.", quote(&k)),
                )
            })?;
            out.insert(k, v);
        } else if let Some(nb) = schema
            .blocks
            .get(&k)
            .filter(|nb| nb.nesting == Nesting::Map)
        {
            // Labelled blocks: an object whose keys are the labels, as Terraform's JSON syntax.
            let (v, sensitive) = match v {
                Value::Sensitive(inner) => (*inner, true),
                v => (v, false),
            };
            let labelled = match v {
                Value::Unknown(_) => return Ok(None),
                Value::Null(_) => ValueMap::new(),
                Value::Object(o) | Value::Map(o) => o,
                _ => {
                    return Err((
                        "Incorrect JSON value type",
                        format!(
                            "A JSON object is required, whose keys are the labels of {} blocks.",
                            quote(&k)
                        ),
                    ))
                }
            };
            let mut blocks = ValueMap::new();
            for (label, body) in labelled {
                let Some(b) = json_block(body, &nb.block)? else {
                    return Ok(None);
                };
                blocks.insert(label, if sensitive { b.sensitive() } else { b });
            }
            out.insert(k, Value::Map(blocks));
        } else if let Some(nb) = schema.blocks.get(&k) {
            let Some(items) = json_blocks(&k, v, nb)? else {
                return Ok(None);
            };
            let ty = block_type(&nb.block);
            let v = match nb.nesting {
                Nesting::Single => items.into_iter().next().unwrap_or(Value::Null(ty)),
                Nesting::List => Value::List(items),
                Nesting::Set => Value::set(items),
                Nesting::Map => unreachable!("labelled blocks are decoded above"),
            };
            out.insert(k, v);
        } else {
            let hint = suggest::suffix(
                &k,
                schema
                    .attributes
                    .keys()
                    .chain(schema.blocks.keys())
                    .map(String::as_str),
            );
            return Err((
                "Unsupported argument",
                format!(
                    "An argument named {} is not expected here.{hint}",
                    quote(&k)
                ),
            ));
        }
    }
    for (name, attr) in &schema.attributes {
        if !out.contains_key(name) {
            if attr.required {
                return Err((
                    "Missing required argument",
                    format!(
                        "The argument {} is required, but no definition was found.",
                        quote(name)
                    ),
                ));
            }
            out.insert(name.clone(), Value::Null(attr.ty.clone()));
        }
    }
    for (name, nb) in &schema.blocks {
        if !out.contains_key(name) {
            let ty = block_type(&nb.block);
            out.insert(
                name.clone(),
                match nb.nesting {
                    Nesting::Single => Value::Null(ty),
                    Nesting::List => Value::List(Vec::new()),
                    Nesting::Set => Value::set(Vec::new()),
                    Nesting::Map => Value::Map(ValueMap::new()),
                },
            );
        }
    }
    Ok(Some(Value::Object(out)))
}

/// The object type a schema block describes (attributes and nested blocks).
pub(crate) fn block_type(b: &SchemaBlock) -> Type {
    let mut attrs: BTreeMap<String, Type> = b
        .attributes
        .iter()
        .map(|(k, a)| (k.clone(), a.ty.clone()))
        .collect();
    for (k, nb) in &b.blocks {
        let t = block_type(&nb.block);
        attrs.insert(
            k.clone(),
            match nb.nesting {
                Nesting::Single => t,
                Nesting::List => Type::list(t),
                Nesting::Set => Type::set(t),
                Nesting::Map => Type::map(t),
            },
        );
    }
    Type::object(attrs)
}

struct BodyEval<'e, 'a> {
    ev: &'e mut Evaluator<'a>,
    file: crate::diag::FileId,
    diags: Diagnostics,
    /// The body comes from JSON: arguments may stand for nested blocks.
    json: bool,
    /// Where the arguments and blocks of the body being evaluated are written, relative to
    /// it (`Sources`); `None` when not asked for.
    sources: Option<Sources>,
}

/// The instances of one nested block type found in a body: known values, or unknown when a
/// `dynamic` block's `for_each` is not known yet.
#[derive(Default)]
struct Found {
    items: Vec<Value>,
    /// Each item's label (map blocks), with the span of the block that gave it.
    keys: Vec<(Option<String>, Option<Span>)>,
    unknown: bool,
    /// The first block's header, for count errors.
    first: Option<Span>,
    /// The first block beyond the first, for "too many" errors.
    second: Option<Span>,
    /// With `BodyEval::sources`: each item's block and the sources inside it.
    sources: Vec<(Option<Span>, Sources)>,
}

/// Appends `rel` (a path inside the value at `prefix`) to `prefix`.
fn join(prefix: &str, rel: &str) -> String {
    if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        format!("{prefix}.{rel}")
    }
}

impl BodyEval<'_, '_> {
    fn span(&self, node: &impl hcl_edit::Span) -> Option<Span> {
        node.span().map(|r| Span {
            file: self.file,
            start: r.start,
            end: r.end,
        })
    }

    fn err(&mut self, span: Option<Span>, summary: &str, detail: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(summary, detail).with_span(span));
    }

    fn header(&self, b: &Block) -> Option<Span> {
        let start = b.ident.span()?.start;
        let end = b
            .labels
            .last()
            .and_then(|l| l.span())
            .or(b.ident.span())?
            .end;
        Some(Span {
            file: self.file,
            start,
            end,
        })
    }

    fn body(&mut self, body: &Body, schema: Option<&SchemaBlock>, header: Option<Span>) -> Value {
        let mut out: ValueMap = ValueMap::new();
        let mut found: BTreeMap<String, Found> = BTreeMap::new();
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
                    if self.sources.is_some() {
                        let sp = self.span(a);
                        if let (Some(src), Some(sp)) = (self.sources.as_mut(), sp) {
                            src.push((name.to_string(), sp));
                        }
                    }
                    let value = match self.ev.expr(&a.value) {
                        Ok(v) => v,
                        Err(d) => {
                            self.diags.extend(d);
                            continue;
                        }
                    };
                    let Some(schema) = schema else {
                        out.insert(name.to_string(), value);
                        continue;
                    };
                    if self.json && !schema.attributes.contains_key(name) {
                        if let Some(nb) = schema.blocks.get(name) {
                            let sp = self.span(&a.key);
                            let f = found.entry(name.to_string()).or_default();
                            match json_blocks(name, value, nb) {
                                Ok(None) => f.unknown = true,
                                Ok(Some(items)) => {
                                    for _ in 0..items.len() {
                                        if f.first.is_none() {
                                            f.first = sp;
                                        } else if f.second.is_none() {
                                            f.second = sp;
                                        }
                                    }
                                    f.items.extend(items);
                                }
                                Err((summary, detail)) => {
                                    let sp = self.span(&a.value);
                                    self.err(sp, summary, detail);
                                }
                            }
                            continue;
                        }
                    }
                    let Some(attr) = schema.attributes.get(name) else {
                        let hint = if schema.blocks.contains_key(name) {
                            format!(" Did you mean to define a block of type {}?", quote(name))
                        } else {
                            suggest::suffix(name, schema.attributes.keys().map(String::as_str))
                        };
                        let sp = self.span(&a.key);
                        self.err(
                            sp,
                            "Unsupported argument",
                            format!(
                                "An argument named {} is not expected here.{hint}",
                                quote(name)
                            ),
                        );
                        continue;
                    };
                    if attr.computed && !attr.optional && !attr.required {
                        let sp = self.span(&a.key);
                        self.err(
                            sp,
                            "Value for unconfigurable attribute",
                            format!(
                                "Can't configure a value for {}: its value will be decided \
                                 automatically based on the result of applying this \
                                 configuration.",
                                quote(name)
                            ),
                        );
                        continue;
                    }
                    match super::convert::convert(value, &attr.ty).map_err(|e| e.to_string()) {
                        Ok(v) => {
                            out.insert(name.to_string(), v);
                        }
                        Err(m) => {
                            let sp = self.span(&a.value);
                            self.err(
                                sp,
                                "Incorrect attribute value type",
                                format!("Inappropriate value for attribute {}: {m}.", quote(name)),
                            );
                            // It is defined, with the wrong type: not also "missing".
                            out.insert(name.to_string(), Value::Unknown(attr.ty.clone()));
                        }
                    }
                }
                Structure::Block(b) if b.ident.as_str() == "dynamic" => {
                    self.dynamic(b, schema, &mut found)
                }
                Structure::Block(b) => {
                    let name = b.ident.as_str().to_string();
                    let (nested, nesting) = match schema {
                        None => (None, None),
                        Some(s) => match s.blocks.get(&name) {
                            Some(nb) => (Some(&nb.block), Some(nb.nesting)),
                            None => {
                                self.unsupported_block(b, s);
                                continue;
                            }
                        },
                    };
                    let mut key = None;
                    if nesting == Some(Nesting::Map) {
                        if b.labels.len() != 1 {
                            let sp = match b.labels.get(1) {
                                Some(l) => self.span(l),
                                None => self.header(b),
                            };
                            self.err(
                                sp,
                                &format!("Wrong number of labels for {name}"),
                                format!(
                                    "A {name} block has exactly one label: its key in the map."
                                ),
                            );
                            continue;
                        }
                        key = Some(b.labels[0].as_str().to_string());
                    } else if schema.is_some() && !b.labels.is_empty() {
                        let sp = self.span(&b.labels[0]);
                        self.err(
                            sp,
                            &format!("Extraneous label for {name}"),
                            format!("No labels are expected for {name} blocks."),
                        );
                        continue;
                    }
                    let h = self.header(b);
                    let (v, inner) = self.nested_body(&b.body, nested, h);
                    let at = self.span(b);
                    let f = found.entry(name).or_default();
                    if f.first.is_none() {
                        f.first = h;
                    } else if f.second.is_none() {
                        f.second = h;
                    }
                    f.items.push(v);
                    f.keys.push((key, h));
                    if let Some(inner) = inner {
                        f.sources.push((at, inner));
                    }
                }
            }
        }
        let Some(schema) = schema else {
            for (name, f) in found {
                self.block_sources(&name, &f, Nesting::List, None);
                let v = if f.unknown {
                    Value::unknown()
                } else {
                    Value::Tuple(f.items)
                };
                out.insert(name, v);
            }
            return Value::Object(out);
        };
        for (name, attr) in &schema.attributes {
            if out.contains_key(name) {
                continue;
            }
            if attr.required {
                self.err(
                    header,
                    "Missing required argument",
                    format!(
                        "The argument {} is required, but no definition was found.",
                        quote(name)
                    ),
                );
            }
            out.insert(name.clone(), Value::Null(attr.ty.clone()));
        }
        for (name, nb) in &schema.blocks {
            let f = found.remove(name).unwrap_or_default();
            let ty = block_type(&nb.block);
            let n = f.items.len();
            if !f.unknown {
                let max = match nb.nesting {
                    Nesting::Single => Some(1),
                    _ => nb.max_items,
                };
                if let Some(max) = max.filter(|m| n > *m) {
                    self.err(
                        f.second.or(f.first).or(header),
                        &format!("Too many {name} blocks"),
                        format!(
                            "No more than {max} {} block{} allowed.",
                            quote(name),
                            if max == 1 { " is" } else { "s are" }
                        ),
                    );
                }
                if n < nb.min_items {
                    self.err(
                        header,
                        &format!("Insufficient {name} blocks"),
                        format!(
                            "At least {} {} block{} required.",
                            nb.min_items,
                            quote(name),
                            if nb.min_items == 1 { " is" } else { "s are" }
                        ),
                    );
                }
            }
            let order = match nb.nesting {
                Nesting::Set => Some(set_order(&f.items)),
                _ => None,
            };
            self.block_sources(name, &f, nb.nesting, order);
            let v = match nb.nesting {
                Nesting::Single if f.unknown => Value::Unknown(ty),
                Nesting::Single => f.items.into_iter().next().unwrap_or(Value::Null(ty)),
                Nesting::List if f.unknown => Value::Unknown(Type::list(ty)),
                Nesting::List => Value::List(f.items),
                Nesting::Set if f.unknown => Value::Unknown(Type::set(ty)),
                Nesting::Set => Value::set(f.items),
                Nesting::Map if f.unknown => Value::Unknown(Type::map(ty)),
                Nesting::Map => {
                    let mut m = ValueMap::new();
                    for (item, (key, sp)) in f.items.into_iter().zip(f.keys) {
                        let Some(key) = key else { continue };
                        if m.insert(key.clone(), item).is_some() {
                            self.err(
                                sp,
                                &format!("Duplicate {name} block"),
                                format!(
                                    "A {name} block with the key {} is already defined.",
                                    quote(&key)
                                ),
                            );
                        }
                    }
                    Value::Map(m)
                }
            };
            out.insert(name.clone(), v);
        }
        Value::Object(out)
    }

    /// Evaluates a nested block's body, with its sources (relative to it) when asked for.
    fn nested_body(
        &mut self,
        body: &Body,
        schema: Option<&SchemaBlock>,
        header: Option<Span>,
    ) -> (Value, Option<Sources>) {
        let outer = self.sources.as_mut().map(std::mem::take);
        let v = self.body(body, schema, header);
        let inner = std::mem::replace(&mut self.sources, outer);
        (v, inner)
    }

    /// Records the sources of the blocks of one type: `name` (the first block), and each
    /// element (`name[i]`, or `name` for a single block) with the paths inside it. `order`
    /// lists, for a set, which item is at each position of the set.
    fn block_sources(
        &mut self,
        name: &str,
        f: &Found,
        nesting: Nesting,
        order: Option<Vec<usize>>,
    ) {
        let Some(out) = self.sources.as_mut() else {
            return;
        };
        if let Some(first) = f.first {
            out.push((name.to_string(), first));
        }
        if f.unknown {
            return;
        }
        let order = order.unwrap_or_else(|| (0..f.sources.len()).collect());
        for (position, &item) in order.iter().enumerate() {
            let Some((at, inner)) = f.sources.get(item) else {
                continue;
            };
            let here = match nesting {
                Nesting::Single if position == 0 => name.to_string(),
                Nesting::Single => continue,
                _ => format!("{name}[{position}]"),
            };
            if nesting != Nesting::Single {
                if let Some(at) = at {
                    out.push((here.clone(), *at));
                }
            }
            for (rel, sp) in inner {
                out.push((join(&here, rel), *sp));
            }
        }
    }

    fn unsupported_block(&mut self, b: &Block, s: &SchemaBlock) {
        let name = b.ident.as_str();
        let hint = if s.attributes.contains_key(name) {
            format!(
                " Did you mean to define argument {}? If so, use the equals sign to assign it a \
                 value.",
                quote(name)
            )
        } else {
            suggest::suffix(name, s.blocks.keys().map(String::as_str))
        };
        let sp = self.span(&b.ident);
        self.err(
            sp,
            "Unsupported block type",
            format!(
                "Blocks of type {} are not expected here.{hint}",
                quote(name)
            ),
        );
    }

    /// `dynamic "x" { for_each = ..., iterator = it, content { ... } }`: one `x` block per
    /// element, with `it.key` and `it.value` bound in `content`.
    fn dynamic(
        &mut self,
        b: &Block,
        schema: Option<&SchemaBlock>,
        found: &mut BTreeMap<String, Found>,
    ) {
        let h = self.header(b);
        let Some(label) = b.labels.first().map(|l| l.as_str().to_string()) else {
            self.err(
                h,
                "Missing name for dynamic",
                "A dynamic block must have one label: the type of the blocks it generates.",
            );
            return;
        };
        let nested = match schema {
            None => None,
            Some(s) => match s.blocks.get(&label) {
                Some(nb) => Some(&nb.block),
                None => {
                    let hint = suggest::suffix(&label, s.blocks.keys().map(String::as_str));
                    let sp = self.span(&b.labels[0]);
                    self.err(
                        sp,
                        "Unsupported block type",
                        format!(
                            "Blocks of type {} are not expected here.{hint}",
                            quote(&label)
                        ),
                    );
                    return;
                }
            },
        };
        let mut for_each = None;
        let mut iterator = label.clone();
        let mut content = None;
        let mut labels = None;
        for s in b.body.iter() {
            match s {
                Structure::Attribute(a) => match a.key.as_str() {
                    "for_each" => for_each = Some(&a.value),
                    "iterator" => match &a.value {
                        Expression::Variable(v) => iterator = v.as_str().to_string(),
                        other => {
                            let sp = self.span(other);
                            self.err(
                                sp,
                                "Invalid dynamic iterator name",
                                "Dynamic iterator must be a single variable name.",
                            );
                            return;
                        }
                    },
                    "labels" => labels = Some(&a.value),
                    other => {
                        let sp = self.span(&a.key);
                        self.err(
                            sp,
                            "Unsupported argument",
                            format!(
                                "An argument named {} is not expected here.{}",
                                quote(other),
                                suggest::suffix(other, ["for_each", "iterator", "labels"])
                            ),
                        );
                    }
                },
                Structure::Block(c) if c.ident.as_str() == "content" => {
                    if content.is_some() {
                        let sp = self.header(c);
                        self.err(
                            sp,
                            "Duplicate content block",
                            "Only one content block is allowed in a dynamic block.",
                        );
                    }
                    content = Some(&c.body);
                }
                Structure::Block(c) => {
                    let sp = self.span(&c.ident);
                    self.err(
                        sp,
                        "Unsupported block type",
                        format!(
                            "Blocks of type {} are not expected here. A dynamic block holds \
                             only a content block.",
                            quote(c.ident.as_str())
                        ),
                    );
                }
            }
        }
        let (Some(for_each), Some(content)) = (for_each, content) else {
            self.err(
                h,
                "Invalid dynamic block",
                "A dynamic block needs a for_each argument and a content block.",
            );
            return;
        };
        let coll = match self.ev.expr(for_each) {
            Ok(v) => v,
            Err(d) => {
                self.diags.extend(d);
                return;
            }
        };
        let at = self.span(b);
        let f = found.entry(label.clone()).or_default();
        if f.first.is_none() {
            f.first = h;
        }
        let coll = coll.unmarked().clone();
        let items: Vec<(Value, Value)> = match coll {
            Value::Unknown(_) => {
                found.entry(label).or_default().unknown = true;
                return;
            }
            Value::Null(_) => {
                let sp = self.span(for_each);
                self.err(
                    sp,
                    "Invalid dynamic for_each value",
                    "Cannot use a null value in for_each.",
                );
                return;
            }
            Value::List(v) | Value::Tuple(v) => v
                .into_iter()
                .enumerate()
                .map(|(i, x)| (Value::int(i as i64), x))
                .collect(),
            Value::Set(v) => v.into_iter().map(|x| (x.clone(), x)).collect(),
            Value::Map(m) | Value::Object(m) => {
                m.into_iter().map(|(k, x)| (Value::String(k), x)).collect()
            }
            other => {
                let sp = self.span(for_each);
                self.err(
                    sp,
                    "Invalid dynamic for_each value",
                    format!(
                        "Cannot use a {} value in for_each. An iterable collection is required.",
                        crate::eval::convert::friendly_name(&other.type_of(), false)
                    ),
                );
                return;
            }
        };
        // Over an open collection (`for_each = aws_x.y.rules` of a resource without a
        // schema), the iterator's value is open: a missing attribute is unknown.
        let open = self.ev.is_open_expr(for_each);
        for (k, v) in items {
            self.ev
                .bindings
                .push((iterator.clone(), Value::object([("key", k), ("value", v)])));
            let open_n = self.ev.bind_open(open);
            let (value, inner) = self.nested_body(content, nested, h);
            // A map block's key: the one element of `labels`.
            let key = match labels {
                Some(e) => match self.ev.expr(e) {
                    Ok(l) => match l.unmarked().elements().map(|e| e.to_vec()) {
                        Some(ls) if ls.len() == 1 && ls[0].as_str().is_some() => {
                            ls[0].as_str().map(str::to_string)
                        }
                        _ => {
                            let sp = self.span(e);
                            self.err(
                                sp,
                                "Invalid dynamic block labels",
                                "labels must be a list of one string: the block's key.",
                            );
                            None
                        }
                    },
                    Err(d) => {
                        self.diags.extend(d);
                        None
                    }
                },
                None => None,
            };
            self.ev.bindings.pop();
            self.ev.unbind_open(open_n);
            let is_map = schema
                .and_then(|s| s.blocks.get(&label))
                .is_some_and(|nb| nb.nesting == Nesting::Map);
            if is_map && key.is_none() && labels.is_none() {
                self.err(
                    h,
                    "Missing dynamic block labels",
                    format!("{label} blocks have a key: give it with labels = [KEY]."),
                );
                return;
            }
            let f = found.entry(label.clone()).or_default();
            if f.items.len() == 1 && f.second.is_none() {
                f.second = h;
            }
            f.items.push(value);
            f.keys.push((key, h));
            if let Some(inner) = inner {
                f.sources.push((at, inner));
            }
        }
    }
}

/// Which item is at each position of `Value::set(items)`: the canonical order, the first of
/// equal items kept (as `Value::set` sorts and deduplicates).
fn set_order(items: &[Value]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|a, b| crate::value::canonical_cmp(&items[*a], &items[*b]));
    order.dedup_by(|a, b| items[*a] == items[*b]);
    order
}
