// Kernels for the #[launch_config] trybuild cases (tests/tests/ui.rs builds
// them with occ-build for sm_80 and sm_90 and points OCC_MANIFEST at the result).

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace blur {
template <typename T, int R>
__global__ void box(const T* in, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T acc = 0;
    for (int k = -R; k <= R; ++k) {
        int j = min(max(i + k, 0), n - 1);
        acc += in[j];
    }
    out[i] = acc / T(2 * R + 1);
}
template __global__ void box<float, 5>(const float*, float*, int);
template __global__ void box<double, 5>(const double*, double*, int);
}  // namespace blur

// Dynamic shared memory: one tile per block, sized at launch.
extern "C" __global__ void tiled(const float* in, float* out, int n) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = tile[blockDim.x - 1 - threadIdx.x];
}

// Two blocks of 1024 threads per SM leave 32 registers a thread: it spills.
extern "C" __global__ void __launch_bounds__(1024, 2) spilly(const float* in, float* out, int n) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = in[(threadIdx.x + i * 131) % n];
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i)
#pragma unroll
        for (int j = 0; j < 64; ++j) acc += v[i] * v[(i * 7 + j) % 64] * (float)(i ^ j);
    out[threadIdx.x] = acc;
}

// 40 KB of static shared memory and blocks of at most 128 threads: few
// warps fit on an SM.
extern "C" __global__ void __launch_bounds__(128) hoarder(const float* in, float* out, int n) {
    __shared__ float cache[10240];
    for (int k = threadIdx.x; k < 10240; k += blockDim.x) cache[k] = in[(blockIdx.x * 10240 + k) % n];
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = cache[(threadIdx.x * 77) % 10240];
}

// A 32x8 tile transpose: tests/tests/ui.rs declares its launch in the
// build, `.launch("transpose_tiled", Launch::block_2d(32, 8))`.
extern "C" __global__ void transpose_tiled(const float* in, float* out, int w, int h) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8)
        if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
