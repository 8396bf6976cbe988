//! The fuzz targets' findings, kept: every input in `fixtures/fuzz/regressions/TARGET/` (each
//! one a crash a fuzz target found, whose cause was fixed) is run through the check of its
//! target (`fixtures/fuzz/src/checks.rs`, the very function the target calls), as an ordinary
//! test; so is every seed in `fixtures/fuzz/seeds/TARGET/`. A check panics when Cairn
//! misbehaves on its input: the failures are reported all at once, each by its file.
//!
//! The fuzz targets themselves run under `cargo fuzz` (README.md, "Fuzzing").

#[path = "../../fixtures/fuzz/src/checks.rs"]
mod checks;

use std::path::PathBuf;

fn replay(kind: &str) -> usize {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/fuzz")
        .join(kind);
    let mut failures = Vec::new();
    let mut ran = 0;
    for (target, check) in checks::TARGETS {
        let dir = root.join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files.into_iter().filter(|f| f.is_file()) {
            let data = std::fs::read(&file).expect("a finding");
            ran += 1;
            let outcome = std::panic::catch_unwind(|| check(&data));
            if let Err(e) = outcome {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{}: {msg}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    ran
}

/// Each finding of the fuzz targets no longer fails its check.
#[test]
fn fuzz_findings_pass_their_checks() {
    let ran = replay("regressions");
    eprintln!("{ran} findings replayed");
}

/// Each seed of the fuzz targets passes its check (the seeds are the corpora's start).
#[test]
fn fuzz_seeds_pass_their_checks() {
    let ran = replay("seeds");
    assert!(ran > 0, "no seeds in fixtures/fuzz/seeds");
}

/// Writes the seeds of the binary formats into `fixtures/fuzz/seeds/` (run by hand when a
/// format changes: `CAIRN_FUZZ_STATE=DIR cargo test -p cairn --test fuzz -- --ignored`, with
/// DIR a state directory after an `apply` of the quickstart, `fixtures/examples/quickstart`).
/// The text formats' seeds are files of `fixtures/` (`fixtures/fuzz/run.sh` gathers them).
#[test]
#[ignore]
fn write_seeds() {
    use cairn::fuzzing as f;
    use cairn::state::fuzzing as sf;
    let seeds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/fuzz/seeds");
    let put = |target: &str, name: &str, data: &[u8]| {
        let dir = seeds.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), data).unwrap();
    };

    // The log: the quickstart's events, as records (length-prefixed), and its checkpoint.
    let state = std::env::var("CAIRN_FUZZ_STATE").expect("CAIRN_FUZZ_STATE=a state directory");
    let events = match cairn::state::peek_events(std::path::Path::new(&state), 1, 100_000, None)
        .expect("the state's events")
    {
        cairn::state::Peek::Events(e, _) => e,
        cairn::state::Peek::Busy => panic!("the state is busy"),
    };
    let mut log = Vec::new();
    let mut prev = [0u8; 32];
    for e in &events {
        let payload = sf::encode_event(e);
        // Every other record chained, as a log written across the chain's introduction.
        let record = if e.seq % 2 == 0 {
            sf::seal_record(&prev, e.seq, &payload)
        } else {
            payload.clone()
        };
        prev = cairn::state::chain::link(&prev, e.seq, &payload);
        log.extend_from_slice(&(record.len() as u16).to_be_bytes());
        log.extend_from_slice(&record);
        if e.seq == 1 || matches!(e.body, cairn::state::EventBody::RunFinished { .. }) {
            put("event_log", &format!("upto-{}", e.seq), &log);
        }
    }
    let snapshot = cairn::state::Snapshot::replay(&events);
    put(
        "checkpoint",
        "quickstart",
        &sf::encode_checkpoint(&snapshot).unwrap(),
    );
    put(
        "checkpoint",
        "empty",
        &sf::encode_checkpoint(&cairn::state::Snapshot::new()).unwrap(),
    );
    put(
        "checkpoint",
        "head",
        &sf::encode_head(&cairn::state::chain::Head {
            seq: events.len() as u64,
            hash: prev,
        }),
    );

    // Plugin values: a type, then the value as JSON (`J`) and as msgpack.
    let values: &[(&str, &str)] = &[
        (r#""string""#, r#""hello""#),
        (r#""number""#, "12345678901234567890.5"),
        (r#""bool""#, "true"),
        (r#"["list","string"]"#, r#"["a","b",null]"#),
        (r#"["set","number"]"#, "[3,1,2]"),
        (r#"["map","bool"]"#, r#"{"a":true,"b":false}"#),
        (r#"["tuple",["string","number"]]"#, r#"["x",1]"#),
        (
            r#"["object",{"id":"string","tags":["map","string"],"n":"number"},["n"]]"#,
            r#"{"id":"i-1","tags":{"k":"v"},"n":null}"#,
        ),
        (
            r#""dynamic""#,
            r#"{"value":[1,"two"],"type":["tuple",["number","string"]]}"#,
        ),
        (
            r#"["list",["object",{"a":["set","string"],"b":"dynamic"}]]"#,
            r#"[{"a":["x","y"],"b":{"value":"s","type":"string"}}]"#,
        ),
    ];
    for (i, (ty, json)) in values.iter().enumerate() {
        let t = f::type_from_json(&serde_json::from_str(ty).unwrap()).unwrap();
        put(
            "plugin_value",
            &format!("{i}-json"),
            format!("{ty}\nJ{json}").as_bytes(),
        );
        let v = f::decode_json(json.as_bytes(), &t).unwrap_or_else(|e| panic!("{json}: {e}"));
        let mut msgpack = format!("{ty}\n").into_bytes();
        msgpack.extend(f::encode_msgpack(&v, &t).unwrap());
        put("plugin_value", &format!("{i}-msgpack"), &msgpack);
    }
    // An unknown value, and a refined unknown (extension 12).
    put("plugin_value", "unknown", b"\"string\"\n\xd4\x00\x00");
    put(
        "plugin_value",
        "refined-unknown",
        b"\"string\"\n\xc7\x03\x0c\x81\x01\xc3",
    );

    // Plugin schemas, protocol 5 and 6.
    {
        use cairn::provider::plugin::proto::tfplugin5 as p5;
        use cairn::provider::plugin::proto::tfplugin6 as p6;
        use prost::Message as _;
        let attr5 = |name: &str, ty: &str, required: bool| p5::schema::Attribute {
            name: name.into(),
            r#type: ty.as_bytes().to_vec(),
            required,
            optional: !required,
            computed: !required,
            ..Default::default()
        };
        let block5 = p5::schema::Block {
            attributes: vec![
                attr5("id", r#""string""#, false),
                attr5("name", r#""string""#, true),
                attr5("tags", r#"["map","string"]"#, false),
                attr5("ports", r#"["set","number"]"#, false),
            ],
            block_types: vec![p5::schema::NestedBlock {
                type_name: "rule".into(),
                block: Some(p5::schema::Block {
                    attributes: vec![attr5("cidr", r#"["list","string"]"#, true)],
                    ..Default::default()
                }),
                nesting: p5::schema::nested_block::NestingMode::List as i32,
                min_items: 0,
                max_items: 3,
            }],
            ..Default::default()
        };
        let schema5 = p5::Schema {
            version: 1,
            block: Some(block5),
        };
        let r5 = p5::get_provider_schema::Response {
            provider: Some(p5::Schema::default()),
            resource_schemas: [("t_thing".to_string(), schema5.clone())].into(),
            data_source_schemas: [("t_lookup".to_string(), schema5)].into(),
            ..Default::default()
        };
        let mut bytes = vec![0u8];
        bytes.extend(r5.encode_to_vec());
        put("plugin_schema", "v5", &bytes);

        let attr6 = |name: &str, ty: &str| p6::schema::Attribute {
            name: name.into(),
            r#type: ty.as_bytes().to_vec(),
            optional: true,
            ..Default::default()
        };
        let nested = p6::schema::Attribute {
            name: "disks".into(),
            nested_type: Some(p6::schema::Object {
                attributes: vec![attr6("size", r#""number""#), attr6("kind", r#""string""#)],
                nesting: p6::schema::object::NestingMode::Map as i32,
                ..Default::default()
            }),
            optional: true,
            ..Default::default()
        };
        let schema6 = p6::Schema {
            version: 2,
            block: Some(p6::schema::Block {
                attributes: vec![attr6("id", r#""string""#), nested],
                ..Default::default()
            }),
        };
        let r6 = p6::get_provider_schema::Response {
            resource_schemas: [("t_thing".to_string(), schema6.clone())].into(),
            ephemeral_resource_schemas: [("t_token".to_string(), schema6)].into(),
            ..Default::default()
        };
        let mut bytes = vec![1u8];
        bytes.extend(r6.encode_to_vec());
        put("plugin_schema", "v6", &bytes);
    }

    // Registry answers (the first byte picks the kind; see `checks::registry`).
    let reg = |kind: u8, body: &[u8]| {
        let mut v = vec![kind];
        v.extend_from_slice(body);
        v
    };
    put(
        "registry",
        "discovery",
        &reg(
            0,
            br#"{"providers.v1":"/v1/providers/","modules.v1":"https://m.example.com/v1/modules"}"#,
        ),
    );
    put(
        "registry",
        "provider-versions",
        &reg(
            1,
            br#"{"versions":[{"version":"1.2.3","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"}]},{"version":"2.0.0-beta1","platforms":[]}]}"#,
        ),
    );
    let sum = "a".repeat(64);
    put(
        "registry",
        "provider-download",
        &reg(
            2,
            format!(
                "{{\"protocols\":[\"5.0\"],\"os\":\"linux\",\"arch\":\"amd64\",\"filename\":\"p_1.0.0_linux_amd64.zip\",\"download_url\":\"p.zip\",\"shasums_url\":\"SHA256SUMS\",\"shasums_signature_url\":\"SHA256SUMS.sig\",\"shasum\":\"{sum}\",\"signing_keys\":{{\"gpg_public_keys\":[{{\"key_id\":\"ABCD\",\"ascii_armor\":\"-----BEGIN PGP PUBLIC KEY BLOCK-----\\n\\nmQENBF\\n-----END PGP PUBLIC KEY BLOCK-----\\n\"}}]}}}}\n--\n{sum}  p_1.0.0_linux_amd64.zip\n\n--\n-----BEGIN PGP SIGNATURE-----\n\niQEz\n-----END PGP SIGNATURE-----\n"
            )
            .as_bytes(),
        ),
    );
    put(
        "registry",
        "module-versions",
        &reg(
            3,
            br#"{"modules":[{"versions":[{"version":"0.1.0"},{"version":"1.0.0"}]}]}"#,
        ),
    );
    put(
        "registry",
        "module-location",
        &reg(4, br#"{"location":"../archive.tar.gz?archive=tar.gz"}"#),
    );
    let mut zip_bytes = Vec::new();
    {
        let mut z = zip::ZipWriter::new(std::io::Cursor::new(&mut zip_bytes));
        let opts: zip::write::SimpleFileOptions = Default::default();
        z.add_directory("sub/", opts).unwrap();
        z.start_file("main.tf", opts).unwrap();
        std::io::Write::write_all(&mut z, b"variable \"x\" {}\n").unwrap();
        z.start_file("sub/main.tf", opts).unwrap();
        std::io::Write::write_all(&mut z, b"output \"y\" { value = 1 }\n").unwrap();
        z.finish().unwrap();
    }
    put("registry", "module-zip", &reg(5, &zip_bytes));
    let mut tgz = Vec::new();
    {
        let gz = flate2::write::GzEncoder::new(&mut tgz, flate2::Compression::default());
        let mut t = tar::Builder::new(gz);
        let data = b"variable \"x\" {}\n";
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, "main.tf", &data[..]).unwrap();
        let mut l = tar::Header::new_gnu();
        l.set_entry_type(tar::EntryType::Symlink);
        l.set_size(0);
        l.set_mode(0o777);
        l.set_cksum();
        t.append_link(&mut l, "link.tf", "main.tf").unwrap();
        t.into_inner().unwrap().finish().unwrap();
    }
    put("registry", "module-tgz", &reg(6, &tgz));
}

/// `cairn ARGS` in a directory holding `files`: its exit code and its output (both streams).
fn cairn(args: &[&str], files: &[(&str, &[u8])]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, data) in files {
        std::fs::write(dir.path().join(name), data).expect("a file");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("cairn runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The findings as a user meets them: a clear error with its place, exit 1, no panic.
#[test]
fn findings_are_clear_errors_in_the_cli() {
    // config_json: a bare word starting with a multi-byte letter where a value belongs.
    let (code, out) = cairn(
        &["validate", "-no-color"],
        &[(
            "main.tf.json",
            "{\n  \"variable\": {\n    \"x\": {\n      \"default\": \u{7b1}he\n    }\n  }\n}\n"
                .as_bytes(),
        )],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Invalid JSON keyword"), "{out}");
    assert!(out.contains("on main.tf.json:4:"), "{out}");

    // tfvars: a variables file that is not UTF-8, at its first bad byte.
    let (code, out) = cairn(
        &["plan", "-no-color"],
        &[
            ("main.tf", b"variable \"x\" {}\n"),
            ("terraform.tfvars", b"x = \"a\"\n# \xff\n"),
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Invalid character encoding"), "{out}");
    assert!(out.contains("on terraform.tfvars:2:3:"), "{out}");
}
