//! A provider's errors and warnings about a resource instance, as diagnostics: each at the
//! attribute it names in the resource's configuration, the others as one error naming the
//! instance. Shared by the plan, import and apply of an instance.

use super::core::Ctx;
use crate::addr::ResourceInstanceAddr;
use crate::diag::{Diagnostic, Diagnostics};

/// A provider's warnings about an instance, at the attributes they name.
pub(crate) fn report_warnings(
    ctx: &Ctx,
    addr: &ResourceInstanceAddr,
    warnings: &[crate::provider::ProviderDiag],
) {
    if !warnings.is_empty() {
        ctx.report(
            warnings
                .iter()
                .map(|d| provider_diag(ctx, addr, d))
                .collect(),
        );
    }
}

/// A provider's error for a resource instance: each diagnostic the provider gave about an
/// attribute, at that attribute in the resource's configuration; the others (and a message
/// with no diagnostics) as one error naming the instance, as the built-in providers' are.
pub(crate) fn provider_failure(
    ctx: &Ctx,
    addr: &ResourceInstanceAddr,
    what: &str,
    e: &crate::provider::ProviderError,
) -> Diagnostics {
    if !e.diags.iter().any(|d| !d.path.is_empty()) {
        return provider_error(addr, what, &e.message);
    }
    // Those that name an attribute, there; the rest as one error about the instance.
    let mut out: Diagnostics = e
        .diags
        .iter()
        .filter(|d| !d.path.is_empty())
        .map(|d| provider_diag(ctx, addr, d))
        .collect();
    let rest: Vec<String> = e
        .diags
        .iter()
        .filter(|d| d.path.is_empty() && d.error)
        .map(|d| match d.detail.as_str() {
            "" => d.summary.clone(),
            detail => format!("{}: {detail}", d.summary),
        })
        .collect();
    if !rest.is_empty() {
        out.extend(provider_error(addr, what, &rest.join("; ")));
    }
    out
}

fn resource_config<'a>(
    ctx: &'a Ctx,
    addr: &ResourceInstanceAddr,
) -> Option<&'a crate::config::Resource> {
    let module = ctx.config.module(&addr.resource.module.without_keys())?;
    module
        .resources
        .get(&crate::config::ResourceKey {
            mode: addr.resource.mode,
            type_: addr.resource.type_.clone(),
            name: addr.resource.name.clone(),
        })
        .map(|r| &**r)
}

/// One provider diagnostic about a resource instance, at the attribute it names.
pub(crate) fn provider_diag(
    ctx: &Ctx,
    addr: &ResourceInstanceAddr,
    d: &crate::provider::ProviderDiag,
) -> Diagnostic {
    let res = resource_config(ctx, addr);
    let span =
        res.map(|r| crate::config::spans::span_of_path(&r.body, r.file, &d.path).unwrap_or(r.span));
    let mut detail = d.detail.clone();
    if !d.path.is_empty() && span.is_none_or(|s| res.is_some_and(|r| s == r.span)) {
        // Not written in the configuration: name the attribute.
        let at = format!("(at {})", crate::schema::path_text(&d.path));
        detail = if detail.is_empty() {
            at
        } else {
            format!("{detail} {at}")
        };
    }
    let out = if d.error {
        Diagnostic::error(d.summary.clone(), detail)
    } else {
        Diagnostic::warning(d.summary.clone(), detail)
    };
    out.with_span(span).with_address(addr)
}

pub(crate) fn provider_error(
    addr: &ResourceInstanceAddr,
    what: &str,
    message: &str,
) -> Diagnostics {
    let summary = match what {
        "plan" => "Provider failed to plan",
        "read" => "Error reading data source",
        "refresh" => "Error refreshing state",
        "create" => "Error creating resource",
        "update" => "Error updating resource",
        "delete" => "Error deleting resource",
        _ => "Provider error",
    };
    Diagnostic::error(summary, format!("{addr}: {message}"))
        .with_address(addr)
        .into()
}
