//! Tidy rules of the state crate, checked: only `sled_store.rs` talks to sled, every file says what
//! it is for, and the store can move between threads (the engine shares it behind a mutex).

use std::path::Path;

fn sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for sub in ["src", "tests", "benches"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "rs") {
                let name = format!("{sub}/{}", e.file_name().to_string_lossy());
                let text = std::fs::read_to_string(&path).expect("readable source");
                out.push((name, text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn only_sled_store_rs_talks_to_sled() {
    let offenders: Vec<_> = sources()
        .into_iter()
        .filter(|(name, _)| name.starts_with("src/") && name != "src/sled_store.rs")
        .filter(|(_, text)| text.contains("sled::"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        offenders.is_empty(),
        "sled used outside sled_store.rs: {offenders:?}"
    );
}

#[test]
fn every_file_starts_with_a_doc_line() {
    let missing: Vec<_> = sources()
        .into_iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! line: {missing:?}"
    );
}

#[test]
fn the_store_is_send() {
    fn send<T: Send>() {}
    send::<cairn_state::Store>();
    send::<cairn_state::Snapshot>();
}
