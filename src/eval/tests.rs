//! Evaluator and reference tests: one line of HCL in, one rendered value (or error) out,
//! against a small fixed scope.

use super::{eval, references, Scope, ScopeError, Subject};
use crate::diag::FileId;
use crate::value::{format_hcl, Type, Value};
use std::path::Path;

struct TestScope;

impl Scope for TestScope {
    fn resolve(&self, s: &Subject) -> Result<Value, ScopeError> {
        let obj = |pairs: Vec<(&str, Value)>| Value::object(pairs);
        Ok(match s {
            Subject::Var(n) => match n.as_str() {
                "s" => Value::string("hello"),
                "n" => Value::int(3),
                "list" => Value::List(vec![Value::string("a"), Value::string("b")]),
                "obj" => obj(vec![
                    ("name", Value::string("x")),
                    (
                        "tags",
                        Value::Map([("env".to_string(), Value::string("prod"))].into()),
                    ),
                ]),
                "unk" => Value::Unknown(Type::String),
                "unk_list" => Value::Unknown(Type::list(Type::String)),
                "secret" => Value::string("hunter2").sensitive(),
                "nul" => Value::Null(Type::String),
                "t" => Value::Bool(true),
                other => {
                    return Err(ScopeError::new(
                        "Reference to undeclared input variable",
                        format!(
                            "An input variable with the name {} has not been declared.{}",
                            cairn_state::quote(other),
                            super::suggest::suffix(other, ["s", "n", "list", "obj"])
                        ),
                    ))
                }
            },
            Subject::Resource { type_, name, .. } if type_ == "sim_thing" && name == "many" => {
                Value::Tuple(
                    (0..3)
                        .map(|i| obj(vec![("id", Value::string(format!("id-{i}")))]))
                        .collect(),
                )
            }
            Subject::Resource { type_, name, .. } if type_ == "sim_thing" => obj(vec![
                ("id", Value::Unknown(Type::String)),
                ("name", Value::string(name.clone())),
            ]),
            Subject::CountIndex => Value::int(1),
            s => {
                return Err(ScopeError::new(
                    "Invalid reference",
                    format!("{s:?} is not available here."),
                ))
            }
        })
    }
    fn file(&self) -> FileId {
        FileId(0)
    }
    fn module_dir(&self) -> &Path {
        Path::new(".")
    }
    fn root_dir(&self) -> &Path {
        Path::new(".")
    }
}

/// Evaluates `src` and renders the value as `terraform console` does, or the errors as
/// `Error: summary: detail [at "source text"]`.
fn eval_text(src: &str) -> String {
    let expr = match hcl_edit::parser::parse_expr(src.trim_end()) {
        Ok(e) => e,
        Err(e) => return format!("parse error: {}", e.message()),
    };
    match eval(&expr, &TestScope) {
        Ok(v) => format_hcl(&v),
        Err(diags) => diags
            .iter()
            .map(|d| {
                let at = d
                    .span
                    .and_then(|s| src.get(s.start..s.end))
                    .map(|t| format!(" [at {t:?}]"))
                    .unwrap_or_default();
                format!("Error: {}: {}{at}", d.summary, d.detail)
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[track_caller]
fn check_eval(src: &str, expected: &str) {
    let got = eval_text(src);
    assert_eq!(got, expected, "evaluating {src}");
}

#[test]
fn literals_and_arithmetic() {
    check_eval("1 + 2", "3");
    check_eval("1 + 2 * 3 - 4 / 2", "5");
    check_eval("(1 + 2) * 3", "9");
    check_eval("7 % 3", "1");
    check_eval("-5 % 3", "-2");
    check_eval("5 % 0", "5");
    check_eval("true ? null : \"a\"", "tostring(null)");
    check_eval("-5 + 2", "-3");
    check_eval("10 / 4", "2.5");
    check_eval("9007199254740993 + 0", "9007199254740993");
    check_eval(
        "100000000000000000000000000 + 1",
        "100000000000000000000000001",
    );
    check_eval(
        "1 / 3",
        "0.33333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333333335",
    );
    check_eval("\"5\" + 1", "6");
    check_eval("1.5e3", "1500");
    check_eval("1 < 2 && 2 >= 2", "true");
    check_eval("!true || false", "false");
    check_eval("null", "null");
}

#[test]
fn operator_errors_point_at_the_operand() {
    check_eval(
        "\"a\" + 1",
        "Error: Invalid operand: Unsuitable value for left operand: a number is required. [at \"\\\"a\\\"\"]",
    );
    check_eval(
        "1 + var.nul",
        "Error: Invalid operand: Unsuitable value for right operand: argument must not be null. [at \"var.nul\"]",
    );
    check_eval(
        "1 / 0",
        "Error: Operation failed: Error during operation: can't divide by zero. [at \"1 / 0\"]",
    );
    check_eval(
        "!\"x\"",
        "Error: Invalid operand: Unsuitable value for unary operand: a bool is required. [at \"\\\"x\\\"\"]",
    );
}

#[test]
fn equality_follows_terraform() {
    check_eval("1 == 1.0", "true");
    check_eval("\"1\" == 1", "false");
    check_eval("[1, 2] == [1, 2]", "true");
    check_eval("{a = 1} != {a = 2}", "true");
    check_eval("var.list == [\"a\", \"b\"]", "false");
    check_eval("null == null", "true");
    check_eval("var.unk == \"x\"", "(known after apply)");
}

#[test]
fn unknowns_propagate() {
    check_eval("var.unk", "(known after apply)");
    check_eval("\"x-${var.unk}\"", "(known after apply)");
    check_eval("upper(var.unk)", "(known after apply)");
    check_eval("var.unk_list[0]", "(known after apply)");
    check_eval("var.unk_list[*].id", "(known after apply)");
    check_eval("[for x in var.unk_list : x]", "(known after apply)");
    check_eval("false && var.unk == \"a\"", "false");
    check_eval("true || var.unk == \"a\"", "true");
    check_eval("true && var.unk == \"a\"", "(known after apply)");
    check_eval("var.unk == \"a\" ? 1 : 2", "(known after apply)");
    check_eval("sim_thing.a.id", "(known after apply)");
    check_eval(
        "{ a = sim_thing.a.id, b = 1 }",
        "{\n  \"a\" = (known after apply)\n  \"b\" = 1\n}",
    );
}

#[test]
fn sensitive_marks_propagate() {
    check_eval("var.secret", "(sensitive value)");
    check_eval("\"pw: ${var.secret}\"", "(sensitive value)");
    check_eval("upper(var.secret)", "(sensitive value)");
    check_eval(
        "[var.secret, \"b\"]",
        "[\n  (sensitive value),\n  \"b\",\n]",
    );
    check_eval("var.secret == \"x\"", "(sensitive value)");
}

#[test]
fn templates() {
    check_eval("\"${var.n}\"", "3");
    check_eval("\"n=${var.n}\"", "\"n=3\"");
    check_eval("\"$${not} %%{not}\"", "\"${not} %{not}\"");
    check_eval("\"%{if var.t}yes%{else}no%{endif}\"", "\"yes\"");
    check_eval("\"%{for x in var.list}[${x}]%{endfor}\"", "\"[a][b]\"");
    check_eval(
        "\"%{for i, x in var.list}${i}=${x},%{endfor}\"",
        "\"0=a,1=b,\"",
    );
    check_eval("\"a  ${~ \"b\" ~}  c\"", "\"abc\"");
    check_eval(
        "<<EOT\n%{ for x in var.list ~}\n- ${x}\n%{ endfor ~}\nEOT\n",
        "<<EOT\n- a\n- b\n\nEOT",
    );
    check_eval("<<-EOT\n    a\n      b\n    EOT\n", "<<EOT\na\n  b\n\nEOT");
    check_eval(
        "\"x${var.nul}\"",
        "Error: Invalid template interpolation value: The expression result is null. Cannot include a null value in a string template. [at \"var.nul\"]",
    );
}

#[test]
fn conditionals() {
    check_eval("true ? 1 : 2", "1");
    check_eval("false ? 1 : \"a\"", "\"a\"");
    check_eval("true ? 1 : \"a\"", "\"1\"");
    check_eval("var.n > 2 ? \"big\" : \"small\"", "\"big\"");
    check_eval("true ? var.list : []", "tolist([\n  \"a\",\n  \"b\",\n])");
    check_eval(
        "null ? 1 : 2",
        "Error: Invalid condition result: The condition value is null. Conditions must either be true or false. [at \"null\"]",
    );
    check_eval(
        "true ? 1 : [1]",
        "Error: Inconsistent conditional result types: The true and false result expressions must have consistent types. The 'true' value is number, but the 'false' value is tuple. [at \"true ? 1 : [1]\"]",
    );
}

#[test]
fn for_expressions() {
    check_eval("[for x in [1, 2, 3] : x * 2]", "[\n  2,\n  4,\n  6,\n]");
    check_eval("[for x in [1, 2, 3] : x if x > 1]", "[\n  2,\n  3,\n]");
    check_eval(
        "{for k, v in {a = 1, b = 2} : v => k}",
        "{\n  \"1\" = \"a\"\n  \"2\" = \"b\"\n}",
    );
    check_eval(
        "{for s in [\"ab\", \"ac\", \"b\"] : substr_key(s) => s...}",
        "Error: Call to unknown function: There is no function named \"substr_key\". [at \"substr_key\"]",
    );
    check_eval(
        "{for s in [\"a\", \"b\", \"a\"] : s => upper(s)...}",
        "{\n  \"a\" = [\n    \"A\",\n    \"A\",\n  ]\n  \"b\" = [\n    \"B\",\n  ]\n}",
    );
    check_eval(
        "{for s in [\"a\", \"a\"] : s => s}",
        "Error: Duplicate object key: Two different items produced the key \"a\" in this 'for' expression. If duplicates are expected, use the ellipsis (...) after the value expression to enable grouping by key. [at \"s\"]",
    );
    check_eval(
        "[for i, x in var.list : \"${i}${x}\"]",
        "[\n  \"0a\",\n  \"1b\",\n]",
    );
    check_eval(
        "[for x in var.nul : x]",
        "Error: Iteration over null value: A null value cannot be used as the collection in a 'for' expression. [at \"var.nul\"]",
    );
}

#[test]
fn splats_and_indexing() {
    check_eval(
        "sim_thing.many[*].id",
        "[\n  \"id-0\",\n  \"id-1\",\n  \"id-2\",\n]",
    );
    check_eval(
        "sim_thing.many.*.id",
        "[\n  \"id-0\",\n  \"id-1\",\n  \"id-2\",\n]",
    );
    check_eval("sim_thing.many[1].id", "\"id-1\"");
    check_eval("var.nul[*]", "[]");
    check_eval("var.s[*]", "[\n  \"hello\",\n]");
    check_eval("var.obj.tags[\"env\"]", "\"prod\"");
    check_eval("var.obj[\"name\"]", "\"x\"");
    check_eval("var.list[count.index]", "\"b\"");
    check_eval("var.list.0", "\"a\"");
    check_eval(
        "var.obj.nmae",
        "Error: Unsupported attribute: This object does not have an attribute named \"nmae\". Did you mean \"name\"? [at \".nmae\"]",
    );
    check_eval(
        "var.list[5]",
        "Error: Invalid index: The given key does not identify an element in this collection value. [at \"[5]\"]",
    );
    check_eval(
        "var.nul.x",
        "Error: Attempt to get attribute from null value: This value is null, so it does not have any attributes. [at \".x\"]",
    );
    check_eval(
        "var.list.x",
        "Error: Unsupported attribute: Can't access attributes on a list of objects. Did you mean to access attribute \"x\" for a specific element of the list, or across all elements of the list? [at \".x\"]",
    );
}

#[test]
fn references_errors_and_functions() {
    check_eval(
        "var.nme",
        "Error: Reference to undeclared input variable: An input variable with the name \"nme\" has not been declared. Did you mean \"n\"? [at \"var.nme\"]",
    );
    check_eval(
        "var",
        "Error: Invalid reference: The \"var\" object cannot be accessed directly. Instead, access one of its attributes. [at \"var\"]",
    );
    check_eval(
        "uper(\"a\")",
        "Error: Call to unknown function: There is no function named \"uper\". Did you mean \"upper\"? [at \"uper\"]",
    );
    check_eval(
        "upper()",
        "Error: Not enough function arguments: Function \"upper\" expects 1 argument(s). Missing value for \"str\". [at \"upper()\"]",
    );
    check_eval(
        "upper(\"a\", \"b\")",
        "Error: Too many function arguments: Function \"upper\" expects only 1 argument(s). [at \"\\\"b\\\"\"]",
    );
    check_eval("join(\"-\", [\"a\"], [\"b\", \"c\"])", "\"a-b-c\"");
    check_eval("join(\"-\", [[\"a\", \"b\"], [\"c\"]]...)", "\"a-b-c\"");
    check_eval("try(var.obj.nope, \"fallback\")", "\"fallback\"");
    check_eval("try(var.obj.name, \"fallback\")", "\"x\"");
    check_eval("can(var.obj.nope)", "false");
    check_eval("can(var.unk)", "(known after apply)");
    check_eval("try(var.unk, \"x\")", "(known after apply)");
}

#[test]
fn references_skip_bound_names() {
    let src = "[for x in var.list : x.id if local.keep[x]] + sim_thing.a[0].id + module.m.out + data.sim_lookup.z";
    let expr = hcl_edit::parser::parse_expr(src).unwrap();
    let got: Vec<String> = references(&expr)
        .iter()
        .map(|r| format!("{:?} {:?}", r.subject, &src[r.start..r.end]))
        .collect();
    assert_eq!(
        got,
        [
            "Var(\"list\") \"var.list\"",
            "Local(\"keep\") \"local.keep[x]\"",
            "Resource { mode: Managed, type_: \"sim_thing\", name: \"a\" } \"sim_thing.a[0].id\"",
            "ModuleCall { name: \"m\", output: Some(\"out\") } \"module.m.out\"",
            "Resource { mode: Data, type_: \"sim_lookup\", name: \"z\" } \"data.sim_lookup.z\"",
        ]
    );
}

fn schema() -> crate::schema::Block {
    use crate::schema::{Attribute, Block, NestedBlock, Nesting};
    let attr = |ty: Type, required: bool, computed: bool| Attribute {
        ty,
        required,
        optional: !required && !computed,
        computed,
        force_new: false,
        sensitive: false,
        write_only: false,
        description: String::new(),
    };
    let rule = Block {
        attributes: [
            ("zone".to_string(), attr(Type::String, true, false)),
            ("port".to_string(), attr(Type::Number, false, false)),
        ]
        .into(),
        ..Block::default()
    };
    let settings = Block {
        attributes: [("mode".to_string(), attr(Type::String, false, false))].into(),
        ..Block::default()
    };
    Block {
        attributes: [
            ("name".to_string(), attr(Type::String, true, false)),
            ("size".to_string(), attr(Type::Number, false, false)),
            (
                "tags".to_string(),
                attr(Type::map(Type::String), false, false),
            ),
            ("id".to_string(), attr(Type::String, false, true)),
        ]
        .into(),
        blocks: [
            (
                "rule".to_string(),
                NestedBlock {
                    nesting: Nesting::List,
                    block: rule,
                    min_items: 0,
                    max_items: Some(3),
                },
            ),
            (
                "settings".to_string(),
                NestedBlock {
                    nesting: Nesting::Single,
                    block: settings,
                    min_items: 0,
                    max_items: None,
                },
            ),
        ]
        .into(),
        description: String::new(),
    }
}

#[track_caller]
fn check_body(src: &str, with_schema: bool, expected: &str) {
    let body = hcl_edit::parser::parse_body(src).expect("body parses");
    let s = schema();
    let got = match super::eval_body(&body, with_schema.then_some(&s), &TestScope) {
        Ok(v) => format_hcl(&v),
        Err(d) => d
            .iter()
            .map(|d| {
                let at = d
                    .span
                    .and_then(|s| src.get(s.start..s.end))
                    .map(|t| format!(" [at {t:?}]"))
                    .unwrap_or_default();
                format!("Error: {}: {}{at}", d.summary, d.detail)
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    assert_eq!(got, expected, "evaluating body:\n{src}");
}

#[test]
fn bodies_against_a_schema() {
    check_body(
        "name = \"web\"\nsize = \"3\"\nrule {\n  zone = \"a\"\n}\ndynamic \"rule\" {\n  for_each = var.list\n  iterator = r\n  content {\n    zone = r.value\n    port = r.key\n  }\n}\n",
        true,
        r#"{
  "id" = tostring(null)
  "name" = "web"
  "rule" = tolist([
    {
      "port" = tonumber(null)
      "zone" = "a"
    },
    {
      "port" = 0
      "zone" = "a"
    },
    {
      "port" = 1
      "zone" = "b"
    },
  ])
  "settings" = null
  "size" = 3
  "tags" = tomap(null)
}"#,
    );
    check_body(
        "name = \"x\"\ndynamic \"rule\" {\n  for_each = var.unk_list\n  content {\n    zone = rule.value\n  }\n}\n",
        true,
        r#"{
  "id" = tostring(null)
  "name" = "x"
  "rule" = (known after apply)
  "settings" = null
  "size" = tonumber(null)
  "tags" = tomap(null)
}"#,
    );
    check_body(
        "nmae = \"x\"\nsize = [1]\nid = \"mine\"\nrule = {}\nsetting {}\nsettings {}\nsettings {}\n",
        true,
        "Error: Unsupported argument: An argument named \"nmae\" is not expected here. Did you mean \"name\"? [at \"nmae\"]\n\
         Error: Incorrect attribute value type: Inappropriate value for attribute \"size\": number required. [at \"[1]\"]\n\
         Error: Value for unconfigurable attribute: Can't configure a value for \"id\": its value will be decided automatically based on the result of applying this configuration. [at \"id\"]\n\
         Error: Unsupported argument: An argument named \"rule\" is not expected here. Did you mean to define a block of type \"rule\"? [at \"rule\"]\n\
         Error: Unsupported block type: Blocks of type \"setting\" are not expected here. Did you mean \"settings\"? [at \"setting\"]\n\
         Error: Missing required argument: The argument \"name\" is required, but no definition was found. [at \"n\"]\n\
         Error: Too many settings blocks: No more than 1 \"settings\" block is allowed. [at \"settings\"]",
    );
}

/// A body from a `.tf.json` file: nested blocks arrive as arguments holding an object or an
/// array of objects, and are decoded as blocks by the schema.
#[track_caller]
fn check_json_body(src: &str, expected: &str) {
    let body = hcl_edit::parser::parse_body(src).expect("body parses");
    let s = schema();
    let got = match super::eval_config_body(&body, Some(&s), &TestScope, None, true) {
        Ok(v) => format_hcl(&v),
        Err(d) => d
            .iter()
            .map(|d| format!("Error: {}: {}", d.summary, d.detail))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    assert_eq!(got, expected, "evaluating JSON body:\n{src}");
}

#[test]
fn json_bodies_decode_nested_blocks_by_the_schema() {
    check_json_body(
        "name = \"web\"\nrule = [{\"zone\" = \"a\"}, {\"zone\" = \"b\", \"port\" = \"2\"}]\nsettings = {\"mode\" = \"fast\"}\n",
        r#"{
  "id" = tostring(null)
  "name" = "web"
  "rule" = tolist([
    {
      "port" = tonumber(null)
      "zone" = "a"
    },
    {
      "port" = 2
      "zone" = "b"
    },
  ])
  "settings" = {
    "mode" = "fast"
  }
  "size" = tonumber(null)
  "tags" = tomap(null)
}"#,
    );
    // One object is one block; the usual count and content checks apply.
    check_json_body(
        "name = \"x\"\nrule = {\"zone\" = \"a\"}\nsettings = [{}, {}]\n",
        "Error: Too many settings blocks: No more than 1 \"settings\" block is allowed.",
    );
    check_json_body(
        "name = \"x\"\nrule = [{\"zon\" = \"a\"}]\n",
        "Error: Unsupported argument: An argument named \"zon\" is not expected here. Did you mean \"zone\"?",
    );
    check_json_body(
        "name = \"x\"\nrule = [{\"port\" = 1}]\n",
        "Error: Missing required argument: The argument \"zone\" is required, but no definition was found.",
    );
    check_json_body(
        "name = \"x\"\nrule = \"a\"\n",
        "Error: Incorrect JSON value type: Either a JSON object or a JSON array is required, representing the contents of one or more \"rule\" blocks.",
    );
}

#[test]
fn bodies_without_a_schema_are_taken_as_written() {
    check_body(
        "anything = var.n + 1\nnested {\n  a = 1\n}\n",
        false,
        "{\n  \"anything\" = 4\n  \"nested\" = [\n    {\n      \"a\" = 1\n    },\n  ]\n}",
    );
}

#[test]
fn body_references_skip_dynamic_iterators() {
    let src = r#"
name = var.name
dynamic "rule" {
  for_each = local.rules
  iterator = r
  content {
    zone = r.value.zone
    port = rule.port
    other = [for x in r.value.list : x if var.keep]
  }
}
dynamic "setting" {
  for_each = var.settings
  content {
    mode = setting.value
  }
}
block {
  x = sim_thing.a.id
}
"#;
    let body = hcl_edit::parser::parse_body(src).unwrap();
    let got: Vec<String> = super::body_references(&body)
        .iter()
        .map(|r| src[r.start..r.end].to_string())
        .collect();
    // `r` and `setting` are iterators; `rule.port` refers to a resource type named `rule`
    // because the iterator was renamed to `r`.
    assert_eq!(
        got,
        [
            "var.name",
            "local.rules",
            "rule.port",
            "var.keep",
            "var.settings",
            "sim_thing.a.id"
        ]
    );
}

#[test]
fn template_strip_markers_with_directives() {
    check_eval(
        "\"%{ if var.t ~} yes %{~ else ~} no %{~ endif ~} !\"",
        "\"yes!\"",
    );
    check_eval(
        "\"%{ if !var.t ~} yes %{~ else ~} no %{~ endif } !\"",
        "\"no !\"",
    );
    check_eval(
        "\"[ %{~ for x in var.list ~} ${x} %{~ endfor ~} ]\"",
        "\"[ab]\"",
    );
}

fn expansion(meta: &str, src: &str) -> String {
    let expr = hcl_edit::parser::parse_expr(src).unwrap();
    let errs = |d: crate::diag::Diagnostics| {
        d.iter()
            .map(|d| format!("Error: {}: {}", d.summary, d.detail))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if meta == "count" {
        match super::expand::count_value(&expr, &TestScope) {
            Ok(Some(n)) => n.to_string(),
            Ok(None) => "unknown".into(),
            Err(d) => errs(d),
        }
    } else {
        match super::expand::for_each_value(&expr, &TestScope) {
            Ok(Some(m)) => format_hcl(&Value::Object(m)).replace('\n', " "),
            Ok(None) => "unknown".into(),
            Err(d) => errs(d),
        }
    }
}

#[test]
fn count_and_for_each() {
    let cases = [
        ("count", "3", "3"),
        ("count", "\"2\"", "2"),
        ("count", "var.n - 1", "2"),
        ("count", "-1", "Error: Invalid count argument: The given \"count\" argument value is unsuitable: must be greater than or equal to zero."),
        ("count", "1.5", "Error: Invalid count argument: The given \"count\" argument value is unsuitable: the value must be a whole number."),
        ("count", "\"abc\"", "Error: Incorrect value type: Invalid expression value: a number is required."),
        ("count", "null", "Error: Invalid count argument: The given \"count\" argument value is null. An integer is required."),
        ("count", "var.secret", "Error: Invalid count argument: Sensitive values, or values derived from sensitive values, cannot be used as count arguments."),
        ("count", "var.unk == \"\" ? 1 : 0", "unknown"),
        ("for_each", "{a = 1, b = 2}", "{   \"a\" = 1   \"b\" = 2 }"),
        ("for_each", "[\"a\"]", "Error: Invalid for_each argument: The given \"for_each\" argument value is unsuitable: the \"for_each\" argument must be a map, or set of strings, and you have provided a value of type tuple."),
        ("for_each", "sim_thing.a.id", "unknown"),
        ("for_each", "var.secret", "Error: Invalid for_each argument: Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments. If used, the sensitive value could be exposed as a resource instance key."),
    ];
    for (meta, src, expected) in cases {
        assert_eq!(expansion(meta, src), expected, "{meta} = {src}");
    }
}

#[test]
fn checked_against_terraform_console() {
    // Each of these was compared with `terraform console` (Terraform 1.11).
    check_eval("true ? {a = 1} : {a = \"x\"}", "{\n  \"a\" = \"1\"\n}");
    check_eval(
        "false ? [1] : [\"a\", \"b\"]",
        "tolist([\n  \"a\",\n  \"b\",\n])",
    );
    check_eval("[[1, 2], [3]][*][0]", "[\n  1,\n  3,\n]");
    check_eval("1 + 2 * 3 % 4", "3");
    check_eval("null == false", "false");
    check_eval(
        "[][0]",
        "Error: Invalid index: The given key does not identify an element in this collection value: the collection has no elements. [at \"[0]\"]",
    );
    check_eval(
        "[1][-1]",
        "Error: Invalid index: The given key does not identify an element in this collection value: a negative number is not a valid index for a sequence. [at \"[-1]\"]",
    );
    check_eval(
        "\"x\" ? 1 : 2",
        "Error: Incorrect condition type: The condition expression must be of type bool. [at \"\\\"x\\\"\"]",
    );
}

#[test]
fn strings_print_as_terraform_console_does() {
    check_eval("\"x\\ny\\n\"", "<<EOT\nx\ny\n\nEOT");
    check_eval("{a = \"x\\ny\"}", "{\n  \"a\" = <<-EOT\n  x\n  y\n  EOT\n}");
    check_eval("[\"a\\nb\"]", "[\n  <<-EOT\n  a\n  b\n  EOT,\n]");
    check_eval("\"$${x}\"", "\"${x}\"");
    check_eval("\"a\\\"b\\tc\"", "\"a\\\"b\\tc\"");
}

/// `eval_body_with_sources`: every argument and block by its path in the value, `dynamic`
/// elements at their content's arguments, a set of blocks in the set's order.
#[test]
fn body_sources_by_path() {
    use crate::schema::{Attribute, Block, NestedBlock, Nesting};
    let attr = |ty: Type| Attribute {
        ty,
        required: false,
        optional: true,
        computed: false,
        force_new: false,
        sensitive: false,
        write_only: false,
        description: String::new(),
    };
    let rule = Block {
        attributes: [("zone".to_string(), attr(Type::String))].into(),
        ..Block::default()
    };
    let nested = |nesting| NestedBlock {
        nesting,
        block: rule.clone(),
        min_items: 0,
        max_items: None,
    };
    let s = Block {
        attributes: [("name".to_string(), attr(Type::String))].into(),
        blocks: [
            ("grant".to_string(), nested(Nesting::Set)),
            ("one".to_string(), nested(Nesting::Single)),
            ("rule".to_string(), nested(Nesting::List)),
        ]
        .into(),
        description: String::new(),
    };
    let src = "name = \"x\"\ngrant {\n  zone = \"z\"\n}\ngrant {\n  zone = \"a\"\n}\none {\n  zone = \"o\"\n}\nrule {\n  zone = \"r\"\n}\ndynamic \"rule\" {\n  for_each = var.list\n  content {\n    zone = rule.value\n  }\n}\ndynamic \"grant\" {\n  for_each = var.unk_list\n  content {\n    zone = grant.value\n  }\n}\n";
    let body = hcl_edit::parser::parse_body(src).expect("body parses");
    let line_col = |at: usize| {
        let before = &src[..at];
        let line = before.matches('\n').count() + 1;
        let col = at - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("{line}:{col}")
    };
    let show = |schema: Option<&Block>| -> Vec<String> {
        let (_, sources) = super::eval_body_with_sources(&body, schema, &TestScope, false).unwrap();
        sources
            .iter()
            .map(|(p, sp)| format!("{p} {}", line_col(sp.start)))
            .collect()
    };
    // Without a schema: blocks as written, in order; the unknown dynamic makes `grant`
    // wholly unknown, so only its first block is located.
    assert_eq!(
        show(None),
        [
            "name 1:1",
            "grant 2:1",
            "one 8:1",
            "one[0] 8:1",
            "one[0].zone 9:3",
            "rule 11:1",
            "rule[0] 11:1",
            "rule[0].zone 12:3",
            "rule[1] 14:1",
            "rule[1].zone 17:5",
            "rule[2] 14:1",
            "rule[2].zone 17:5",
        ]
    );
    // With a schema and a known set: the set's canonical order ("a" before "z").
    let body = hcl_edit::parser::parse_body(&src[..src.find("dynamic \"grant\"").unwrap()])
        .expect("body parses");
    let (_, sources) = super::eval_body_with_sources(&body, Some(&s), &TestScope, false).unwrap();
    let got: Vec<String> = sources
        .iter()
        .filter(|(p, _)| !p.starts_with("rule"))
        .map(|(p, sp)| format!("{p} {}", line_col(sp.start)))
        .collect();
    assert_eq!(
        got,
        [
            "name 1:1",
            "grant 2:1",
            "grant[0] 5:1",
            "grant[0].zone 6:3",
            "grant[1] 2:1",
            "grant[1].zone 3:3",
            "one 8:1",
            "one.zone 9:3",
        ]
    );
}
