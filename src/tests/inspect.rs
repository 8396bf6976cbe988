//! `cairn inspect` end to end on the real binary: the corpus of real-world modules under
//! `fixtures/inspect/corpus` (providers Cairn does not have, remote-module layouts), the
//! documented JSON Schema, single-file mode, safety on hostile input, and `validate`.
//!
//! The expectations below were derived by reading each configuration (the comments say
//! which lines give each value), not by running Cairn.

use serde_json::{json, Value as J};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/inspect")
}

fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CAIRN_STATE_DIR")
        .env_remove("CAIRN_LOG")
        .env_remove("TF_WORKSPACE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the cairn binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cairn inspect -json ARGS` in `dir`, checks the exit code is 0 and the document
/// validates against `fixtures/inspect/schema.json`.
fn inspect(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> J {
    let mut all = vec!["inspect", "-json"];
    all.extend_from_slice(args);
    let (code, out, err) = run(dir, &all, env);
    assert_eq!(code, 0, "inspect failed in {}: {err}", dir.display());
    let doc: J = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    check_schema(&doc);
    doc
}

fn check_schema(doc: &J) {
    let schema: J =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("schema.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not valid against schema.json: {errors:#?}"
    );
}

fn resource<'a>(doc: &'a J, id: &str) -> &'a J {
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no resource {id} in {:#}", doc["resources"]))
}

fn ids(doc: &J) -> Vec<&str> {
    doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect()
}

fn named<'a>(doc: &'a J, kind: &str, module: &str, name: &str) -> &'a J {
    doc[kind]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["module"] == module && o["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {module} {name}"))
}

fn at(file: &str, line: u64, column: u64) -> J {
    json!({"file": file, "line": line, "column": column})
}

fn summaries(doc: &J) -> Vec<String> {
    doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}: {}",
                d["severity"].as_str().unwrap(),
                d["summary"].as_str().unwrap()
            )
        })
        .collect()
}

/// terraform-aws-modules/terraform-aws-key-pair, examples/complete: three calls of the module
/// at ../../ (one disabled), aws and tls resources, `try()` outputs.
#[test]
fn corpus_aws_key_pair() {
    let dir = fixtures().join("corpus/aws-key-pair/examples/complete");
    let doc = inspect(&dir, &[], &[]);
    // key_pair: create_private_key = true → aws_key_pair.this[0] and tls_private_key.this[0];
    // key_pair_external: create_private_key false → only the key pair; key_pair_disabled:
    // create = false → nothing. Plus the root's tls_private_key.this.
    assert_eq!(
        ids(&doc),
        [
            "tls_private_key.this",
            "module.key_pair.aws_key_pair.this[0]",
            "module.key_pair.tls_private_key.this[0]",
            "module.key_pair_external.aws_key_pair.this[0]",
        ]
    );
    assert_eq!(doc["providers_without_schema"], json!(["aws", "tls"]));
    assert_eq!(summaries(&doc), ["warning: Providers without a schema"]);

    // local.name = "ex-${replace(basename(path.cwd), "_", "-")}" with path.cwd = .../complete.
    assert_eq!(named(&doc, "locals", "", "name")["value"], "ex-complete");
    let tags = json!({"Example": "ex-complete", "GithubOrg": "terraform-aws-modules", "GithubRepo": "terraform-aws-key-pair"});

    let kp = resource(&doc, "module.key_pair.aws_key_pair.this[0]");
    assert_eq!(kp["key_name"], "ex-complete");
    assert_eq!(kp["key_name_prefix"], J::Null);
    assert_eq!(kp["region"], J::Null);
    assert_eq!(kp["tags"], tags);
    // public_key = trimspace(tls_private_key.this[0].public_key_openssh): computed by tls.
    assert_eq!(kp["public_key"], J::Null);
    assert_eq!(kp["_unknown"], json!(["public_key"]));
    assert_eq!(kp["_type"], "aws_key_pair");
    assert_eq!(kp["_mode"], "managed");
    assert_eq!(kp["_module"], "module.key_pair");
    assert_eq!(kp["_schema"], false);
    assert_eq!(kp["_unknown_expansion"], false);
    assert_eq!(kp["_provider"], "provider[\"aws\"]");
    // main.tf of the module, `resource "aws_key_pair" "this" {` on line 5; ../../main.tf seen
    // from the example directory.
    assert_eq!(kp["_source"], at("../../main.tf", 5, 1));
    assert_eq!(
        kp["_attribute_sources"]["key_name"],
        at("../../main.tf", 10, 3)
    );
    assert_eq!(kp["_attribute_sources"]["tags"], at("../../main.tf", 14, 3));
    assert_eq!(
        kp["_module_calls"],
        json!([{"address": "module.key_pair", "source": "../../", "location": at("main.tf", 20, 1)}])
    );

    let tls = resource(&doc, "module.key_pair.tls_private_key.this[0]");
    // private_key_algorithm defaults to "RSA", so ecdsa_curve is null; rsa_bits 4096.
    assert_eq!(tls["algorithm"], "RSA");
    assert_eq!(tls["ecdsa_curve"], J::Null);
    assert_eq!(tls["rsa_bits"], 4096);
    assert_eq!(tls["_unknown"], json!([]));

    let ext = resource(&doc, "module.key_pair_external.aws_key_pair.this[0]");
    assert_eq!(ext["key_name"], "ex-complete-external");
    assert_eq!(ext["_unknown"], json!(["public_key"]));
    assert_eq!(ext["_module_calls"][0]["location"], at("main.tf", 29, 1));

    // Outputs: try(aws_key_pair.this[0].key_pair_id, null) is unknown (computed); the key
    // name is known; the external call creates no private key, so try(...) gives null.
    let out = |n: &str| named(&doc, "outputs", "", n);
    assert_eq!(out("key_pair_id")["unknown"], json!([""]));
    assert_eq!(out("key_pair_name")["value"], "ex-complete");
    assert_eq!(
        out("external_key_pair_name")["value"],
        "ex-complete-external"
    );
    assert_eq!(out("external_private_key_id")["value"], J::Null);
    assert_eq!(out("external_private_key_id")["unknown"], json!([]));
    assert_eq!(out("private_key_pem")["sensitive"], true);
    assert_eq!(out("private_key_pem")["unknown"], json!([""]));
    // The disabled call's module outputs are all null, not unknown: count = 0.
    let disabled = named(&doc, "outputs", "module.key_pair_disabled", "key_pair_id");
    assert_eq!(disabled["value"], J::Null);
    assert_eq!(disabled["unknown"], json!([]));

    let calls: Vec<&str> = doc["module_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["address"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            "module.key_pair",
            "module.key_pair_disabled",
            "module.key_pair_external"
        ]
    );
}

/// Azure/terraform-azurerm-network: a data source with count, for_each and count variants of
/// one resource, dynamic nested blocks, a local collecting resources, tfvars and -var.
#[test]
fn corpus_azurerm_network() {
    let dir = fixtures().join("corpus/azurerm-network");
    let doc = inspect(&dir, &["-var", "use_for_each=true"], &[]);
    // resource_group_location defaults to null → the data source has count 1; for_each over
    // subnet_names = ["web", "db"] (corpus.auto.tfvars); the count variant has count 0.
    assert_eq!(
        ids(&doc),
        [
            "azurerm_subnet.subnet_for_each[\"db\"]",
            "azurerm_subnet.subnet_for_each[\"web\"]",
            "azurerm_virtual_network.vnet",
            "data.azurerm_resource_group.network[0]",
        ]
    );
    let vnet = resource(&doc, "azurerm_virtual_network.vnet");
    // address_spaces defaults to [] → [var.address_space] = ["10.0.0.0/16"].
    assert_eq!(vnet["address_space"], json!(["10.0.0.0/16"]));
    assert_eq!(vnet["name"], "vnet-main");
    assert_eq!(vnet["resource_group_name"], "rg-net");
    assert_eq!(vnet["dns_servers"], json!([]));
    // tracing_tags_enabled = false: merge(var.tags, {}, {}) = the default tags.
    assert_eq!(vnet["tags"], json!({"environment": "dev"}));
    // location = data.azurerm_resource_group.network[0].location: not written, so unknown.
    assert_eq!(vnet["_unknown"], json!(["location"]));
    assert_eq!(vnet["_source"], at("main.tf", 12, 1));

    let web = resource(&doc, "azurerm_subnet.subnet_for_each[\"web\"]");
    assert_eq!(web["address_prefixes"], json!(["10.0.1.0/24"]));
    assert_eq!(web["virtual_network_name"], "vnet-main");
    assert_eq!(web["enforce_private_link_endpoint_network_policies"], false);
    assert_eq!(web["service_endpoints"], json!([]));
    // The dynamic "delegation" block, and its nested service_delegation block, as lists.
    assert_eq!(
        web["delegation"],
        json!([{"name": "appservice", "service_delegation": [{
            "actions": ["Microsoft.Network/virtualNetworks/subnets/action"],
            "name": "Microsoft.Web/serverFarms"}]}])
    );
    assert_eq!(
        web["_attribute_sources"]["delegation"],
        at("main.tf", 69, 3)
    );
    let db = resource(&doc, "azurerm_subnet.subnet_for_each[\"db\"]");
    assert_eq!(db["service_endpoints"], json!(["Microsoft.Sql"]));
    assert_eq!(db["delegation"], json!([]));

    // local.azurerm_subnets[*].id: ids are computed by the provider → unknown elements.
    let subnets = named(&doc, "outputs", "", "vnet_subnets");
    assert_eq!(subnets["value"], json!([null, null]));
    assert_eq!(subnets["unknown"], json!(["[0]", "[1]"]));
    assert_eq!(
        named(&doc, "outputs", "", "vnet_name")["value"],
        "vnet-main"
    );
    assert_eq!(
        named(&doc, "outputs", "", "vnet_id")["unknown"],
        json!([""])
    );
    assert_eq!(
        named(&doc, "locals", "", "subnet_names_prefixes_map")["value"],
        json!({"db": "10.0.2.0/24", "web": "10.0.1.0/24"})
    );

    // use_for_each is required and has no value in the files: unknown, so both subnet
    // resources expand unknown and appear once each, their configuration evaluated.
    let doc = inspect(&dir, &[], &[]);
    let count = resource(&doc, "azurerm_subnet.subnet_count");
    assert_eq!(count["_unknown_expansion"], true);
    assert_eq!(count["resource_group_name"], "rg-net");
    assert_eq!(
        count["_unknown"],
        json!([
            "address_prefixes[0]",
            "delegation",
            "enforce_private_link_endpoint_network_policies",
            "name",
            "service_endpoints"
        ])
    );
    assert_eq!(
        resource(&doc, "azurerm_subnet.subnet_for_each")["_unknown_expansion"],
        true
    );
    assert_eq!(
        named(&doc, "variables", "", "use_for_each")["unknown"],
        json!([""])
    );

    // TF_VAR_ as Terraform: use_for_each=false selects the count variant.
    let doc = inspect(&dir, &[], &[("TF_VAR_use_for_each", "false")]);
    assert_eq!(
        resource(&doc, "azurerm_subnet.subnet_count[1]")["name"],
        "db"
    );
}

/// A root as `terraform init` leaves it: registry and git modules in .terraform/modules
/// (terraform-google-modules/terraform-google-network's modules/vpc), one never downloaded.
#[test]
fn corpus_gcp_remote_modules() {
    let dir = fixtures().join("corpus/gcp-remote");
    let doc = inspect(&dir, &[], &[]);
    assert_eq!(
        ids(&doc),
        [
            "google_compute_firewall.ssh",
            "module.extra[\"blue\"].google_compute_network.network",
            "module.extra[\"green\"].google_compute_network.network",
            "module.extra[\"green\"].google_compute_shared_vpc_host_project.shared_vpc_host[0]",
            "module.vpc.google_compute_network.network",
        ]
    );
    // The missing module is reported once, at its source; the rest is evaluated.
    assert_eq!(
        summaries(&doc),
        [
            "error: Module not installed",
            "warning: Providers without a schema"
        ]
    );
    assert_eq!(doc["diagnostics"][0]["range"]["start"]["line"], 35);
    assert_eq!(
        doc["providers_without_schema"],
        json!(["google", "google-beta"])
    );

    let net = resource(&doc, "module.vpc.google_compute_network.network");
    // terraform.workspace is "default"; project_id from terraform.tfvars; mtu from the call.
    assert_eq!(net["name"], "corp-default");
    assert_eq!(net["project"], "acme-prod");
    assert_eq!(net["mtu"], 1460);
    assert_eq!(net["routing_mode"], "GLOBAL");
    // bgp_best_path_selection_mode defaults to "LEGACY" → the two STANDARD-only are null.
    assert_eq!(net["bgp_best_path_selection_mode"], "LEGACY");
    assert_eq!(net["bgp_always_compare_med"], J::Null);
    assert_eq!(net["_unknown"], json!([]));
    // No provider block anywhere: the module uses the root's default instance.
    assert_eq!(net["_provider"], "provider[\"google-beta\"]");
    assert_eq!(
        net["_source"],
        at(".terraform/modules/vpc/modules/vpc/main.tf", 20, 1)
    );
    assert_eq!(
        net["_module_calls"],
        json!([{"address": "module.vpc",
                "source": "terraform-google-modules/network/google//modules/vpc",
                "location": at("main.tf", 15, 1)}])
    );
    let green = resource(
        &doc,
        "module.extra[\"green\"].google_compute_network.network",
    );
    assert_eq!(green["name"], "green");
    assert_eq!(green["mtu"], 0);
    assert_eq!(
        green["_module_calls"][0]["address"],
        "module.extra[\"green\"]"
    );
    assert_eq!(
        resource(
            &doc,
            "module.extra[\"green\"].google_compute_shared_vpc_host_project.shared_vpc_host[0]"
        )["project"],
        "acme-prod"
    );

    let fw = resource(&doc, "google_compute_firewall.ssh");
    // name uses module.vpc.network_name (= the written name); network the computed self_link;
    // source_ranges[1] the missing module's output.
    assert_eq!(fw["name"], "allow-ssh-corp-default");
    assert_eq!(fw["allow"], json!([{"ports": ["22"], "protocol": "tcp"}]));
    assert_eq!(fw["source_ranges"], json!(["0.0.0.0/0", null]));
    assert_eq!(fw["_unknown"], json!(["network", "source_ranges[1]"]));

    assert_eq!(
        named(&doc, "outputs", "", "network_name")["value"],
        "corp-default"
    );
    // project_id output: shared_vpc_host ? shared_vpc_host[0].project : network.project.
    assert_eq!(
        named(&doc, "outputs", "", "extra_projects")["value"],
        json!({"blue": "acme-prod", "green": "acme-prod"})
    );
    assert_eq!(
        named(&doc, "outputs", "module.vpc", "network_id")["unknown"],
        json!([""])
    );
    let missing = doc["module_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == "module.missing")
        .unwrap();
    assert_eq!(missing["available"], false);

    // A selected workspace (TF_WORKSPACE) is terraform.workspace.
    let doc = inspect(&dir, &[], &[("TF_WORKSPACE", "staging")]);
    assert_eq!(
        resource(&doc, "module.vpc.google_compute_network.network")["name"],
        "corp-staging"
    );
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

/// Unknowns inside collections and nested blocks, count over an unknown, a failing resource
/// beside good ones, and exit codes.
#[test]
fn unknown_paths_failures_and_exit_codes() {
    let dir = project(&[(
        "main.tf",
        r#"
variable "env" {}
resource "aws_vpc" "v" {
  cidr_block = "10.0.0.0/16"
}
resource "aws_security_group" "sg" {
  name = "sg-${var.env}"
  ingress {
    from_port   = 22
    cidr_blocks = ["10.0.0.0/8", aws_vpc.v.cidr_block, aws_vpc.v.arn]
  }
  ingress {
    from_port   = 443
    cidr_blocks = ["0.0.0.0/0"]
  }
}
resource "aws_instance" "web" {
  count = var.env == "prod" ? 3 : 1
  ami   = "ami-123"
}
resource "aws_s3_bucket" "broken" {
  bucket = "b-${jsondecode("{")}"
}
resource "aws_s3_bucket" "after" {
  bucket = "logs"
  tags   = { of = aws_s3_bucket.broken.bucket }
}
resource "aws_subnet" "s" {
  for_each   = { a = "10.0.1.0/24", b = "10.0.2.0/24" }
  cidr_block = each.value
}
resource "aws_route_table_association" "r" {
  for_each  = aws_subnet.s
  subnet_id = each.value.id
  note      = "${each.key}:${each.value.cidr_block}"
}
"#,
    )]);
    let doc = inspect(dir.path(), &[], &[]);
    let sg = resource(&doc, "aws_security_group.sg");
    assert_eq!(
        sg["ingress"][0]["cidr_blocks"],
        json!(["10.0.0.0/8", "10.0.0.0/16", null])
    );
    assert_eq!(sg["_unknown"], json!(["ingress[0].cidr_blocks[2]", "name"]));
    assert_eq!(sg["ingress"][1]["from_port"], 443);
    let web = resource(&doc, "aws_instance.web");
    assert_eq!(web["_unknown_expansion"], true);
    assert_eq!(web["ami"], "ami-123");
    // The broken argument is a diagnostic with its span; its dependent still appears.
    assert_eq!(
        summaries(&doc),
        [
            "error: Error in function call",
            "warning: Providers without a schema"
        ]
    );
    assert_eq!(doc["diagnostics"][0]["address"], "aws_s3_bucket.broken");
    assert_eq!(doc["diagnostics"][0]["range"]["start"]["line"], 22);
    // Issue 28: the argument that fails is unknown, and the resource stays.
    let broken = resource(&doc, "aws_s3_bucket.broken");
    assert_eq!(broken["_unknown"], json!(["bucket"]));
    // for_each over schemaless resources: each.value.id is unknown, written attributes known.
    let r = resource(&doc, "aws_route_table_association.r[\"b\"]");
    assert_eq!(r["note"], "b:10.0.2.0/24");
    assert_eq!(r["_unknown"], json!(["subnet_id"]));
    let after = resource(&doc, "aws_s3_bucket.after");
    assert_eq!(after["bucket"], "logs");
    assert_eq!(after["_unknown"], json!(["tags.of"]));

    // Nothing to load: exit 1.
    let (code, _, err) = run(dir.path(), &["inspect", "-json", "no-such-dir"], &[]);
    assert_eq!(code, 1, "{err}");
}

/// `cairn inspect FILE.tf` evaluates that file on its own.
#[test]
fn single_file_mode() {
    let dir = project(&[
        ("a.tf", "resource \"aws_s3_bucket\" \"a\" {\n  bucket = \"a-${local.suffix}\"\n}\nlocals {\n  suffix = \"x\"\n}\n"),
        ("b.tf", "resource \"aws_s3_bucket\" \"b\" {\n  bucket = \"b\"\n}\n"),
    ]);
    let doc = inspect(dir.path(), &["a.tf"], &[]);
    assert_eq!(ids(&doc), ["aws_s3_bucket.a"]);
    assert_eq!(resource(&doc, "aws_s3_bucket.a")["bucket"], "a-x");
    assert_eq!(
        resource(&doc, "aws_s3_bucket.a")["_source"],
        at("a.tf", 1, 1)
    );
    let doc = inspect(dir.path(), &[], &[]);
    assert_eq!(ids(&doc), ["aws_s3_bucket.a", "aws_s3_bucket.b"]);
}

/// Untrusted configurations: nothing runs, nothing outside the tree is read, and hostile
/// values hit a bound that is reported.
#[test]
fn safe_on_untrusted_code() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s3cr3t").unwrap();
    let marker = outside.path().join("ran");
    let secret = outside.path().join("secret.txt");
    let main = format!(
        r#"
data "external" "x" {{
  program = ["sh", "-c", "touch {marker}; echo '{{}}'"]
}}
resource "null_resource" "p" {{
  provisioner "local-exec" {{
    command = "touch {marker}"
  }}
}}
resource "aws_s3_bucket" "leak" {{
  bucket = file("{secret}")
}}
resource "aws_s3_bucket" "rel" {{
  bucket = file("../../../../../../../../etc/passwd")
}}
resource "aws_s3_bucket" "ok" {{
  bucket = data.external.x.result.name
}}
output "tiny" {{
  value = 1e-99999999999
}}
"#,
        marker = marker.display(),
        secret = secret.display()
    );
    let dir = project(&[("main.tf", &main)]);
    let doc = inspect(dir.path(), &[], &[]);
    assert!(!marker.exists(), "inspect ran a program");
    let text = doc.to_string();
    assert!(!text.contains("s3cr3t"), "read outside the configuration");
    assert!(!text.contains("root:"), "read outside the configuration");
    let s = summaries(&doc);
    assert_eq!(
        s,
        [
            "error: Number out of range",
            "error: Invalid function argument",
            "error: Invalid function argument",
            "warning: Providers without a schema"
        ]
    );
    let details: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["detail"].as_str())
        .collect();
    assert!(details.iter().any(|d| d.contains("outside")), "{details:?}");
    // The external data source's result is unknown, not run.
    assert_eq!(
        resource(&doc, "aws_s3_bucket.ok")["_unknown"],
        json!(["bucket"])
    );
}

/// `validate` on a configuration whose providers Cairn does not have: valid, with one
/// warning naming them.
#[test]
fn validate_without_providers() {
    let dir = fixtures().join("corpus/azurerm-network");
    let (code, out, err) = run(&dir, &["validate", "-json"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: J = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["valid"], true, "{doc:#}");
    // One warning, for the provider (its `moved` block is one Cairn acts on).
    let warnings: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["summary"].as_str().unwrap())
        .collect();
    assert_eq!(warnings, ["Unchecked provider: \"azurerm\""]);
    let dir = fixtures().join("corpus/aws-key-pair/examples/complete");
    let (code, out, err) = run(&dir, &["validate"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("Unchecked providers: \"aws\", \"tls\""),
        "{err}"
    );
}

/// Hostile input hits a bound that is reported, in every command: no hang, no abort.
#[test]
fn bounds_on_hostile_input() {
    // A number of a hundred billion digits: a diagnostic in plan, not a failed allocation.
    let dir = project(&[("main.tf", "output \"o\" {\n  value = 1e-99999999999\n}\n")]);
    let (code, _, err) = run(dir.path(), &["plan"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Number out of range"), "{err}");
    assert!(err.contains("main.tf:2:11"), "{err}");

    // jsondecode in console: the bound, not a billion zeros.
    let dir = project(&[("main.tf", "")]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("console")
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"jsondecode(\"1e999999999\")\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.len() < 10_000, "{} bytes", all.len());
    assert!(all.contains("out of range"), "{all}");

    // A huge count, a template doubling a string eighty times, and deep nesting: each a
    // diagnostic with its location, and the rest of the view still produced.
    let mut doubling = String::from("locals {\n  s0 = \"ab\"\n");
    for i in 1..80 {
        doubling.push_str(&format!(
            "  s{i} = \"${{local.s{}}}${{local.s{}}}\"\n",
            i - 1,
            i - 1
        ));
    }
    doubling.push_str("}\n");
    let deep = format!(
        "locals {{\n  deep = {}1{}\n}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let dir = project(&[
        (
            "a.tf",
            "resource \"aws_instance\" \"x\" {\n  count = 100000000\n  ami   = \"a\"\n}\n",
        ),
        ("b.tf", &doubling),
        ("c.tf", &deep),
        (
            "d.tf",
            "resource \"aws_s3_bucket\" \"fine\" {\n  bucket = \"fine\"\n}\n",
        ),
    ]);
    let start = std::time::Instant::now();
    let doc = inspect(dir.path(), &[], &[]);
    // Bounded, not hung (generous: a debug build on a shared machine).
    assert!(start.elapsed() < std::time::Duration::from_secs(120));
    let s = summaries(&doc);
    assert!(
        s.contains(&"error: Invalid count argument".to_string()),
        "{s:?}"
    );
    assert!(
        s.contains(&"error: Template result too long".to_string()),
        "{s:?}"
    );
    assert!(s.contains(&"error: Invalid syntax".to_string()), "{s:?}");
    assert_eq!(resource(&doc, "aws_instance.x")["_unknown_expansion"], true);
    assert_eq!(resource(&doc, "aws_s3_bucket.fine")["bucket"], "fine");
}

/// A stack as CDK for Terraform synthesizes it (`cdk.tf.json`): JSON syntax only, `"//"`
/// metadata objects in the file and in a resource, a provider as an array of objects, nested
/// blocks (`ingress`) as an array of objects, templates that unwrap to numbers.
#[test]
fn corpus_cdktf_json() {
    let dir = fixtures().join("corpus/cdktf-json");
    let doc = inspect(&dir, &[], &[]);
    assert_eq!(
        ids(&doc),
        ["aws_s3_bucket.assets", "aws_security_group.web"]
    );
    assert_eq!(doc["providers_without_schema"], json!(["aws"]));
    assert_eq!(summaries(&doc), ["warning: Providers without a schema"]);

    // "bucket": "${var.name}-assets-${var.region}" with the defaults "web" and "eu-west-1";
    // the "//" metadata object is a comment, not an argument.
    let b = resource(&doc, "aws_s3_bucket.assets");
    assert_eq!(b["bucket"], "web-assets-eu-west-1");
    assert_eq!(b["tags"], json!({"Name": "web", "Stack": "web"}));
    assert!(b.get("//").is_none(), "{b:#}");
    // The header points at the resource's name key (line 40: `"assets": {`), each argument
    // at its key.
    assert_eq!(b["_source"], at("cdk.tf.json", 40, 8));
    assert_eq!(b["_attribute_sources"]["bucket"], at("cdk.tf.json", 47, 10));
    assert_eq!(b["_attribute_sources"]["tags"], at("cdk.tf.json", 48, 10));

    // Two ingress blocks; "from_port": "${local.ports[0]}" is the number 80; `lifecycle` is a
    // meta-argument block, not an attribute.
    let sg = resource(&doc, "aws_security_group.web");
    assert_eq!(sg["name"], "web-sg");
    assert_eq!(sg["ingress"][0]["from_port"], 80);
    assert_eq!(sg["ingress"][1]["to_port"], 443);
    assert_eq!(sg["ingress"][1]["cidr_blocks"], json!(["0.0.0.0/0"]));
    assert!(sg.get("lifecycle").is_none(), "{sg:#}");
    assert_eq!(sg["_source"], at("cdk.tf.json", 55, 8));
    assert_eq!(
        sg["_attribute_sources"]["ingress"],
        at("cdk.tf.json", 57, 10)
    );

    let o = named(&doc, "outputs", "", "bucket");
    assert_eq!(o["value"], "web-assets-eu-west-1");
    assert_eq!(o["location"], at("cdk.tf.json", 78, 6));
    let l = named(&doc, "locals", "", "ports");
    assert_eq!(l["value"], json!([80, 443]));
    assert_eq!(l["location"], at("cdk.tf.json", 36, 6));
}

/// `_attribute_sources` inside nested blocks: each block and each argument by its path in the
/// value, the elements of a `dynamic` block at its `content`'s arguments, per instance.
#[test]
fn attribute_sources_in_nested_blocks() {
    let dir = project(&[(
        "main.tf",
        r#"variable "rules" {
  default = [{ port = 80, cidr = "0.0.0.0/0" }, { port = 443, cidr = "10.0.0.0/8" }]
}
resource "aws_security_group" "sg" {
  name = "web"
  ingress {
    from_port   = 22
    cidr_blocks = ["10.0.0.0/8"]
  }
  dynamic "ingress" {
    for_each = var.rules
    content {
      from_port   = ingress.value.port
      cidr_blocks = [ingress.value.cidr]
    }
  }
  egress {
    to_port = 0
    limits {
      max = 1
    }
  }
}
resource "aws_instance" "i" {
  count = 2
  dynamic "ebs_block_device" {
    for_each = range(count.index)
    content {
      volume_size = 10
    }
  }
}
"#,
    )]);
    let doc = inspect(dir.path(), &[], &[]);
    let sg = resource(&doc, "aws_security_group.sg");
    assert_eq!(sg["ingress"][2]["from_port"], 443);
    let m = |line, col| at("main.tf", line, col);
    assert_eq!(
        sg["_attribute_sources"],
        json!({
            "name": m(5, 3),
            "ingress": m(6, 3),
            "ingress[0]": m(6, 3),
            "ingress[0].from_port": m(7, 5),
            "ingress[0].cidr_blocks": m(8, 5),
            "ingress[1]": m(10, 3),
            "ingress[1].from_port": m(13, 7),
            "ingress[1].cidr_blocks": m(14, 7),
            "ingress[2]": m(10, 3),
            "ingress[2].from_port": m(13, 7),
            "ingress[2].cidr_blocks": m(14, 7),
            "egress": m(17, 3),
            "egress[0]": m(17, 3),
            "egress[0].to_port": m(18, 5),
            "egress[0].limits": m(19, 5),
            "egress[0].limits[0]": m(19, 5),
            "egress[0].limits[0].max": m(20, 7),
        })
    );
    // Each instance has its own: the dynamic block makes none for i[0], one for i[1].
    assert_eq!(
        resource(&doc, "aws_instance.i[0]")["_attribute_sources"],
        json!({"ebs_block_device": m(26, 3)})
    );
    assert_eq!(
        resource(&doc, "aws_instance.i[1]")["_attribute_sources"],
        json!({
            "ebs_block_device": m(26, 3),
            "ebs_block_device[0]": m(26, 3),
            "ebs_block_device[0].volume_size": m(29, 7),
        })
    );
}

/// Unknown values reach `_unknown` on every path: from a resource without a schema, an
/// unset variable, or an unknown `count`/`for_each`, through functions, conditionals, `for`
/// expressions, splats, templates (and their `for` directives), locals, module inputs and
/// outputs, `lookup`, `dynamic` blocks and nested collections.
#[test]
fn unknowns_propagate_on_every_path() {
    let dir = project(&[
        (
            "main.tf",
            r#"variable "unset" {}
variable "unset_list" {
  type = list(string)
}
variable "unset_obj" {
  type = object({ a = string, b = list(string) })
}
resource "aws_vpc" "v" {
  cidr_block = "10.0.0.0/16"
  tags       = { Name = "main" }
  rule {
    port = 22
  }
  rule {
    port = 80
  }
}
resource "aws_subnet" "s" {
  count      = 2
  cidr_block = cidrsubnet(aws_vpc.v.cidr_block, 8, count.index)
}
resource "aws_instance" "many" {
  count = length(var.unset_list)
  ami   = "ami-1"
}
resource "aws_eip" "e" {
  for_each = toset(var.unset_list)
  name     = each.key
}
locals {
  whole = aws_vpc.v
  pick  = 1 == 1 ? aws_vpc.v : null
}
module "m" {
  source = "./m"
  vpc    = aws_vpc.v
}
module "mc" {
  source = "./m"
  count  = length(var.unset_list)
  vpc    = aws_vpc.v
}
resource "aws_thing" "t" {
  fn           = upper(aws_vpc.v.arn)
  fn_known     = upper(aws_vpc.v.tags.Name)
  cond         = var.unset == "x" ? "a" : "b"
  cond_open    = true ? aws_vpc.v.id : "x"
  cond_root    = (1 == 1 ? aws_vpc.v : null).arn
  for_open     = [for r in aws_vpc.v.rule : r.id]
  for_known    = [for r in aws_vpc.v.rule : r.port]
  for_fn       = [for v in values({ a = aws_vpc.v }) : v.owner_id]
  eips         = [for k, e in aws_eip.e : k]
  splat        = aws_subnet.s[*].id
  splat_known  = aws_subnet.s[*].cidr_block
  tmpl         = "arn=${aws_vpc.v.arn}"
  tmpl_for     = "%{for r in aws_vpc.v.rule}${r.id},%{endfor}"
  tmpl_known   = "%{for r in aws_vpc.v.rule}${r.port},%{endfor}"
  local_attr   = local.whole.id
  local_cond   = local.pick.arn
  fn_root      = one([aws_vpc.v]).id
  merged       = merge(aws_vpc.v, { extra = 1 }).owner_id
  lookup       = lookup(aws_vpc.v, "id", "none")
  lookup_known = lookup(aws_vpc.v.tags, "Name", "none")
  mod_out      = module.m.vpc_id
  mod_whole    = module.m.vpc.arn
  mod_counted  = module.mc[0].vpc_id
  nested       = { a = [aws_vpc.v.id, "x"], b = "y" }
  var_obj      = var.unset_obj.b
  count_dep    = aws_instance.many[0].ami
  dynamic "rule" {
    for_each = aws_vpc.v.rule
    content {
      port = rule.value.port
      id   = rule.value.id
    }
  }
  dynamic "unk" {
    for_each = var.unset_list
    content {
      v = unk.value
    }
  }
}
"#,
        ),
        (
            "m/main.tf",
            "variable \"vpc\" {}\noutput \"vpc_id\" {\n  value = var.vpc.id\n}\noutput \"vpc\" {\n  value = var.vpc\n}\n",
        ),
    ]);
    let doc = inspect(dir.path(), &[], &[]);
    assert_eq!(
        summaries(&doc),
        ["warning: Providers without a schema"],
        "{:#}",
        doc["diagnostics"]
    );
    let t = resource(&doc, "aws_thing.t");
    assert_eq!(
        t["_unknown"],
        json!([
            "cond",
            "cond_open",
            "cond_root",
            "count_dep",
            "eips",
            "fn",
            "fn_root",
            "for_fn[0]",
            "for_open[0]",
            "for_open[1]",
            "local_attr",
            "local_cond",
            "lookup",
            "merged",
            "mod_counted",
            "mod_out",
            "mod_whole",
            "nested.a[0]",
            "rule[0].id",
            "rule[1].id",
            "splat[0]",
            "splat[1]",
            "tmpl",
            "tmpl_for",
            "unk",
            "var_obj"
        ])
    );
    // What is known stays known.
    assert_eq!(t["fn_known"], "MAIN");
    assert_eq!(t["for_known"], json!([22, 80]));
    assert_eq!(t["splat_known"], json!(["10.0.0.0/24", "10.0.1.0/24"]));
    assert_eq!(t["tmpl_known"], "22,80,");
    assert_eq!(t["lookup_known"], "main");
    assert_eq!(t["nested"], json!({"a": [null, "x"], "b": "y"}));
    assert_eq!(
        t["rule"],
        json!([{"id": null, "port": 22}, {"id": null, "port": 80}])
    );
    // The resources of unknown expansion appear once, their configuration evaluated.
    let many = resource(&doc, "aws_instance.many");
    assert_eq!(many["_unknown_expansion"], true);
    assert_eq!(many["ami"], "ami-1");
    let e = resource(&doc, "aws_eip.e");
    assert_eq!(e["_unknown_expansion"], true);
    assert_eq!(e["_unknown"], json!(["name"]));
    // Through the module: its input is open, so its outputs are unknown where they read an
    // attribute the resource does not write.
    let out = named(&doc, "outputs", "module.m", "vpc_id");
    assert_eq!(out["unknown"], json!([""]));
    let mc = doc["module_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == "module.mc")
        .unwrap();
    assert_eq!(mc["unknown_expansion"], true);
}
