//! Unit tests of the formatter; the end-to-end goldens (made by Terraform) are in
//! `src/tests/fmt.rs`.

use super::format_source;

fn fmt(s: &str) -> String {
    format_source(s).unwrap_or_else(|e| panic!("syntax error: {e:?}"))
}

#[test]
fn aligns_equals_and_spaces_tokens() {
    assert_eq!(fmt("a=1\nbbb  =  [1,2]\n"), "a   = 1\nbbb = [1, 2]\n");
}

#[test]
fn unwraps_single_interpolation_and_quotes_labels() {
    assert_eq!(
        fmt("resource aws_instance x {\n  ami = \"${var.ami}\"\n}\n"),
        "resource \"aws_instance\" \"x\" {\n  ami = var.ami\n}\n"
    );
}

#[test]
fn keeps_trailing_blanks_and_bom_is_dropped() {
    assert_eq!(fmt("a=1   "), "a = 1   ");
    assert_eq!(fmt("\u{feff}a=1\r\n"), "a = 1\r\n");
}

#[test]
fn a_syntax_error_is_returned() {
    assert!(format_source("a = \n").is_err());
}

#[test]
fn a_heredoc_closed_without_a_newline_is_an_error_as_in_terraform() {
    let e = format_source("a = <<EOT\nhello\nEOT").unwrap_err();
    assert_eq!((e.0, e.2), (16, "Unterminated template string"));
    assert!(format_source("a = <<EOT\nhello\nEOT\n").is_ok());
}
