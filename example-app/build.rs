fn main() {
    occ_build::Build::new()
        .glob("kernels/*.cu")
        .archs(["sm_80", "sm_86", "sm_90"])
        .compile();
}
