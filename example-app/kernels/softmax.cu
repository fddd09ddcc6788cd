// Row softmax: one block of 128 threads (4 warps) per row. Every phase
// boundary syncs the block on its own named barrier (`bar.sync id, nthreads`,
// ids 1..5), as warp-specialized kernels name theirs. A kernel could reuse one
// id; this one keeps them distinct on purpose: ptxas counts them
// (`used 6 barriers`, id 0 included), and on sm_90, whose SM has two barrier
// sets per block slot, 6 barriers a block allow 64 / 6 = 10 blocks, fewer than
// the 16 the warp slots allow at 128 threads: barriers bound occupancy.
#define SOFTMAX_THREADS 128
#define BAR(id) asm volatile("bar.sync " #id ", %0;" ::"r"(SOFTMAX_THREADS) : "memory")

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS) row_softmax(const float* __restrict__ in, float* __restrict__ out, int cols) {
    __shared__ float warp_part[2][SOFTMAX_THREADS / 32];
    const float* row = in + (size_t)blockIdx.x * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid / 32;

    float m = -3.402823466e38f;
    for (int c = tid; c < cols; c += SOFTMAX_THREADS) m = fmaxf(m, row[c]);
    m = warp_max(m);
    if (lane == 0) warp_part[0][warp] = m;
    BAR(1);
    m = warp_part[0][0];
#pragma unroll
    for (int w = 1; w < SOFTMAX_THREADS / 32; ++w) m = fmaxf(m, warp_part[0][w]);

    float sum = 0.0f;
    for (int c = tid; c < cols; c += SOFTMAX_THREADS) {
        float e = __expf(row[c] - m);
        dst[c] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) warp_part[1][warp] = sum;
    BAR(2);
    sum = warp_part[1][0];
#pragma unroll
    for (int w = 1; w < SOFTMAX_THREADS / 32; ++w) sum += warp_part[1][w];
    const float inv = 1.0f / sum;
    // Each thread rescales what it wrote itself; the barrier orders the
    // block's global writes before the next phase on other warps.
    BAR(3);
    for (int c = tid; c < cols; c += SOFTMAX_THREADS) dst[c] *= inv;
    // The block's last two phases: every rescaled value is stored before the
    // block's warps leave (BAR 4), and the partials are free again (BAR 5).
    BAR(4);
    if (tid < 2 * (SOFTMAX_THREADS / 32)) warp_part[tid / 4][tid % 4] = 0.0f;
    BAR(5);
}
