//! Configuration loading: a module tree read from disk into blocks and expressions (the
//! hcl-edit AST, kept with spans). Loading never calls a provider; a bad file never stops the
//! other files from being checked.
