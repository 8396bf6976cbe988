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
use crate::provider::{Block as SchemaBlock, Nesting};
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
/// (`config::json` cannot tell them apart without it).
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
    nb: &crate::provider::NestedBlock,
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
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        if let Some(attr) = schema.attributes.get(&k) {
            let v = super::convert::convert(v, &attr.ty).map_err(|e| {
                (
                    "Incorrect attribute value type",
                    format!("Inappropriate value for attribute {}: {e}.", quote(&k)),
                )
            })?;
            out.insert(k, v);
        } else if let Some(nb) = schema.blocks.get(&k) {
            let Some(items) = json_blocks(&k, v, nb)? else {
                return Ok(None);
            };
            let ty = block_type(&nb.block);
            let v = match nb.nesting {
                Nesting::Single => items.into_iter().next().unwrap_or(Value::Null(ty)),
                Nesting::List => Value::List(items),
                Nesting::Set => Value::set(items),
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
                },
            );
        }
    }
    Ok(Some(Value::Object(out)))
}

/// The object type a schema block describes (attributes and nested blocks).
pub fn block_type(b: &SchemaBlock) -> Type {
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
}

/// The instances of one nested block type found in a body: known values, or unknown when a
/// `dynamic` block's `for_each` is not known yet.
#[derive(Default)]
struct Found {
    items: Vec<Value>,
    unknown: bool,
    /// The first block's header, for count errors.
    first: Option<Span>,
    /// The first block beyond the first, for "too many" errors.
    second: Option<Span>,
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
        let mut out: BTreeMap<String, Value> = BTreeMap::new();
        let mut found: BTreeMap<String, Found> = BTreeMap::new();
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let name = a.key.as_str();
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
                        }
                    }
                }
                Structure::Block(b) if b.ident.as_str() == "dynamic" => {
                    self.dynamic(b, schema, &mut found)
                }
                Structure::Block(b) => {
                    let name = b.ident.as_str().to_string();
                    let nested = match schema {
                        None => None,
                        Some(s) => match s.blocks.get(&name) {
                            Some(nb) => Some(&nb.block),
                            None => {
                                self.unsupported_block(b, s);
                                continue;
                            }
                        },
                    };
                    if schema.is_some() && !b.labels.is_empty() {
                        let sp = self.span(&b.labels[0]);
                        self.err(
                            sp,
                            &format!("Extraneous label for {name}"),
                            format!("No labels are expected for {name} blocks."),
                        );
                        continue;
                    }
                    let h = self.header(b);
                    let v = self.body(&b.body, nested, h);
                    let f = found.entry(name).or_default();
                    if f.first.is_none() {
                        f.first = h;
                    } else if f.second.is_none() {
                        f.second = h;
                    }
                    f.items.push(v);
                }
            }
        }
        let Some(schema) = schema else {
            for (name, f) in found {
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
            let v = match nb.nesting {
                Nesting::Single if f.unknown => Value::Unknown(ty),
                Nesting::Single => f.items.into_iter().next().unwrap_or(Value::Null(ty)),
                Nesting::List if f.unknown => Value::Unknown(Type::list(ty)),
                Nesting::List => Value::List(f.items),
                Nesting::Set if f.unknown => Value::Unknown(Type::set(ty)),
                Nesting::Set => Value::set(f.items),
            };
            out.insert(name.clone(), v);
        }
        Value::Object(out)
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
                    "labels" => {}
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
        for (k, v) in items {
            self.ev
                .bindings
                .push((iterator.clone(), Value::object([("key", k), ("value", v)])));
            let value = self.body(content, nested, h);
            self.ev.bindings.pop();
            let f = found.entry(label.clone()).or_default();
            if f.items.len() == 1 && f.second.is_none() {
                f.second = h;
            }
            f.items.push(value);
        }
    }
}
