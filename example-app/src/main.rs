//! example-app: CUDA kernels built with occ-build; prints the occupancy plan.

#[allow(dead_code)]
mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn main() {
    println!(
        "occupancy plan ({} archs: {})",
        kernels::ARCHS.len(),
        kernels::ARCHS.join(", ")
    );
    let manifest = include_str!(concat!(env!("OUT_DIR"), "/occ/manifest.json"));
    print!("{manifest}");
}
