#!/bin/sh
# Builds a program that writes kernels.rs from a manifest.json with the
# generator of the occ tree TREE (default this checkout): bench/kernels_rs.py's
# BASE_GEN, to time two generators side by side on one crate.
#
#   bench/gen-kernels-rs.sh /work/main /tmp/gen-main   # then BASE_GEN=/tmp/gen-main
set -eu
tree=$(cd "${1:-$(dirname "$0")/..}" && pwd)
out=$2
dir=$(mktemp -d)
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "gen-kernels-rs"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
occ-model = { path = "$tree/occ-model" }
TOML
cat > "$dir/src/main.rs" <<'RS'
//! `gen-kernels-rs MANIFEST OUT`: kernels.rs of a manifest.json.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (manifest, out) = (&args[1], &args[2]);
    let text = std::fs::read_to_string(manifest).expect("read the manifest");
    let m = occ_model::schema::manifest::Manifest::from_json(&text, std::path::Path::new(manifest))
        .expect("a manifest");
    std::fs::write(out, occ_model::render::kernels_rs::kernels_rs(&m)).expect("write kernels.rs");
}
RS
cp "$tree/Cargo.lock" "$dir/Cargo.lock"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$dir/target}" cargo build --offline --quiet --manifest-path "$dir/Cargo.toml"
cp "${CARGO_TARGET_DIR:-$dir/target}/debug/gen-kernels-rs" "$out"
rm -rf "$dir"
