fn main() {
    occ_build::Build::new()
        .glob("kernels/*.cu")
        .archs(["sm_80", "sm_86", "sm_90"])
        // `block_sum` takes `ITEMS` (32) floats of dynamic shared memory
        // per thread, whatever block its site tunes: judged with them.
        .dynamic_smem("block_sum", occ_build::DynamicSmem::per_thread(32 * 4))
        .compile();
}
