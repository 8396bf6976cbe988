//! The command line: clap commands, arguments to options, printing, prompts, exit codes. The
//! only place that prints or reads the environment.
