//! The built-in function library (Terraform's functions). Each function documents how it
//! treats unknown arguments.

use std::path::Path;

/// What a function may know of its surroundings: the confinement of filesystem functions.
pub struct FunctionContext<'a> {
    /// Relative paths are resolved against this directory (`path.module`).
    pub module_dir: &'a Path,
    /// Files outside this tree may not be read.
    pub root_dir: &'a Path,
}

/// A function call failed: which argument (if one is to blame) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionError {
    /// Index of the argument at fault, for the diagnostic's span.
    pub arg: Option<usize>,
    pub message: String,
}
