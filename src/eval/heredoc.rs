//! Terraform's whitespace rules for templates whose literals span lines (heredocs, and the
//! templates of `templatefile`/`templatestring`).
//!
//! HCL's scanner ends a literal token at every newline, and a strip marker (`~`) trims only
//! the token next to it: `%{ if x ~}` followed by a newline and an indented line removes the
//! newline but keeps the indentation. In a quoted string there are no raw newlines, so a
//! strip marker trims all the whitespace next to it.
//!
//! A flush heredoc (`<<-`) then removes the smallest indentation of its lines, counted after
//! the strip markers were applied: a line whose only leading text was whitespace before a
//! `%{~` counts as indentation 0, and so does a line that starts with `${` or `%{`; lines of
//! whitespace alone are not counted and keep their whitespace. hcl-edit dedents heredocs when
//! it parses them, without those rules, so `flush` first puts back the indentation it removed
//! (as spaces) and then applies Terraform's rule.

use hcl_edit::template::{Directive, Element, Template};

/// `s` with the whitespace trimmed from the start of its first line token (`start`) and the
/// end of its last one (`end`); each token ends after a newline.
pub(crate) fn strip_lines(s: &str, start: bool, end: bool) -> String {
    let mut pieces: Vec<&str> = s.split_inclusive('\n').collect();
    if start {
        if let Some(first) = pieces.first_mut() {
            *first = first.trim_start();
        }
    }
    if end {
        if let Some(last) = pieces.last_mut() {
            *last = last.trim_end();
        }
    }
    pieces.concat()
}

/// One token of a template in source order: a literal (by its index among the template's
/// literals) or a non-literal part with its strip markers.
enum Tok {
    Lit(usize),
    Mark { before: bool, after: bool },
}

fn flatten(t: &Template, lits: &mut Vec<String>, toks: &mut Vec<Tok>) {
    for el in t.iter() {
        match el {
            Element::Literal(s) => {
                toks.push(Tok::Lit(lits.len()));
                lits.push(s.as_str().to_string());
            }
            Element::Interpolation(i) => toks.push(Tok::Mark {
                before: i.strip.strip_start(),
                after: i.strip.strip_end(),
            }),
            Element::Directive(d) => match &**d {
                Directive::If(d) => {
                    toks.push(Tok::Mark {
                        before: d.if_expr.strip.strip_start(),
                        after: d.if_expr.strip.strip_end(),
                    });
                    flatten(&d.if_expr.template, lits, toks);
                    if let Some(e) = &d.else_expr {
                        toks.push(Tok::Mark {
                            before: e.strip.strip_start(),
                            after: e.strip.strip_end(),
                        });
                        flatten(&e.template, lits, toks);
                    }
                    toks.push(Tok::Mark {
                        before: d.endif_expr.strip.strip_start(),
                        after: d.endif_expr.strip.strip_end(),
                    });
                }
                Directive::For(d) => {
                    toks.push(Tok::Mark {
                        before: d.for_expr.strip.strip_start(),
                        after: d.for_expr.strip.strip_end(),
                    });
                    flatten(&d.for_expr.template, lits, toks);
                    toks.push(Tok::Mark {
                        before: d.endfor_expr.strip.strip_start(),
                        after: d.endfor_expr.strip.strip_end(),
                    });
                }
            },
        }
    }
}

fn assign(t: &mut Template, lits: &mut impl Iterator<Item = String>) {
    for el in t.iter_mut() {
        match el {
            Element::Literal(s) => {
                if let Some(new) = lits.next() {
                    *s.as_mut() = new;
                }
            }
            Element::Interpolation(_) => {}
            Element::Directive(d) => match &mut **d {
                Directive::If(d) => {
                    assign(&mut d.if_expr.template, lits);
                    if let Some(e) = &mut d.else_expr {
                        assign(&mut e.template, lits);
                    }
                }
                Directive::For(d) => assign(&mut d.for_expr.template, lits),
            },
        }
    }
}

/// The template of a `<<-` heredoc that hcl-edit dedented by `indent`, with Terraform's
/// indentation removed instead (see the module docs).
pub(crate) fn flush(t: &Template, indent: usize) -> Template {
    // Put back what hcl-edit removed: `indent` characters at the start of every non-empty
    // line of the top-level literals that starts a line (hcl-edit leaves directive bodies).
    let mut t = t.clone();
    let pad = " ".repeat(indent);
    // A literal that ends a line right before `${` or `%{` lost exactly `indent` characters
    // of whitespace there (had there been none, hcl-edit would not have dedented at all).
    let literal: Vec<bool> = t.iter().map(|e| matches!(e, Element::Literal(_))).collect();
    let mut at_start = true;
    for (k, el) in t.iter_mut().enumerate() {
        match el {
            Element::Literal(s) => {
                let mut out = String::with_capacity(s.len() + indent * 4);
                for (n, line) in s.split_inclusive('\n').enumerate() {
                    if (n > 0 || at_start) && line != "\n" {
                        out.push_str(&pad);
                    }
                    out.push_str(line);
                }
                if (s.ends_with('\n') || s.is_empty() && at_start)
                    && literal.get(k + 1) == Some(&false)
                {
                    out.push_str(&pad);
                }
                at_start = s.ends_with('\n');
                *s.as_mut() = out;
            }
            _ => at_start = false,
        }
    }
    let mut lits = Vec::new();
    let mut toks = Vec::new();
    flatten(&t, &mut lits, &mut toks);
    // Terraform's rule, over line tokens as they are after stripping.
    let mut min = usize::MAX;
    let mut adjust: Vec<(usize, usize)> = Vec::new(); // (literal, piece)
    let mut newline = true;
    for (k, tok) in toks.iter().enumerate() {
        match tok {
            Tok::Mark { .. } => {
                if newline {
                    min = 0;
                }
                newline = false;
            }
            Tok::Lit(i) => {
                let strip_start = k > 0 && matches!(toks[k - 1], Tok::Mark { after: true, .. });
                let strip_end = matches!(toks.get(k + 1), Some(Tok::Mark { before: true, .. }));
                let pieces: Vec<&str> = lits[*i].split_inclusive('\n').collect();
                let count = pieces.len();
                for (n, piece) in pieces.into_iter().enumerate() {
                    let mut eff = piece;
                    if n == 0 && strip_start {
                        eff = eff.trim_start();
                    }
                    if n + 1 == count && strip_end {
                        eff = eff.trim_end();
                    }
                    if newline {
                        let trimmed = eff.trim_start();
                        if !(trimmed.is_empty() && eff.ends_with('\n')) {
                            min = min.min(eff.chars().count() - trimmed.chars().count());
                            adjust.push((*i, n));
                        }
                    }
                    newline = eff.ends_with('\n');
                }
            }
        }
    }
    if min != usize::MAX && min > 0 {
        let mut by_lit: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for (i, n) in adjust {
            by_lit.entry(i).or_default().push(n);
        }
        for (i, pieces_to_cut) in by_lit {
            let pieces: Vec<String> = lits[i]
                .split_inclusive('\n')
                .enumerate()
                .map(|(n, p)| {
                    if pieces_to_cut.contains(&n) {
                        let cut: usize = p
                            .chars()
                            .take(min)
                            .take_while(|c| c.is_whitespace())
                            .map(char::len_utf8)
                            .sum();
                        p[cut..].to_string()
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            lits[i] = pieces.concat();
        }
    }
    assign(&mut t, &mut lits.into_iter());
    t
}
