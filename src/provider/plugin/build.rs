//! Compiles the vendored plugin protocol definitions with `protox` (pure Rust, no `protoc`)
//! into tonic clients and servers (servers are for the test providers under `fixtures/`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "src/provider/plugin/proto";
    let files = [
        "tfplugin5.proto",
        "tfplugin6.proto",
        "grpc_controller.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={dir}/{f}");
    }
    let fds = protox::compile(files.iter().map(|f| format!("{dir}/{f}")), [dir])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .generate_default_stubs(true)
        .compile_fds(fds)?;
    Ok(())
}
