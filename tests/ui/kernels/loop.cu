// A kernel that spills inside a loop, for the #[launch_config] error that
// names the line (tests/ui/spill-line.rs). tests/tests/ui.rs finds the
// lines below by their `occ-test:` comments and checks the manifest and
// the error against them.

// Two blocks of 1024 threads per SM leave 32 registers a thread; each step
// keeps 48 values live.
extern "C" __global__ void __launch_bounds__(1024, 2) loopspill(const float* in, float* out, int n, int steps) {
    float acc = 1.0f;
    for (int t = 0; t < steps; ++t) {  // occ-test: loop
        float v[48];
#pragma unroll
        for (int i = 0; i < 48; ++i) v[i] = in[(t * 131 + i * 17 + threadIdx.x) % n] * acc;  // occ-test: spills
#pragma unroll
        for (int i = 0; i < 48; ++i) acc += v[i] * v[47 - i] + v[(i * 5) % 48];
    }
    out[threadIdx.x] = acc;
}
