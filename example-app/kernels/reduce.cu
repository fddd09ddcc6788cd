// Block sum reduction. Each thread stages ITEMS values in dynamic shared
// memory (coalesced loads), sums ITEMS of them, and the block combines the
// partial sums with warp shuffles. Shared memory grows with the block:
// ITEMS * 4 = 128 bytes per thread, so shared memory, not warps, bounds how
// many threads share an SM. Launch with a block size that is a multiple of 32
// and ITEMS * 4 * blockDim.x bytes of dynamic shared memory.
#define ITEMS 32

extern "C" __global__ void block_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
    extern __shared__ float stage[];
    const unsigned tid = threadIdx.x, nt = blockDim.x;
    const size_t base = (size_t)blockIdx.x * nt * ITEMS;
#pragma unroll 4
    for (unsigned k = 0; k < ITEMS; ++k) {
        size_t i = base + (size_t)k * nt + tid;
        stage[k * nt + tid] = i < (size_t)n ? in[i] : 0.0f;
    }
    __syncthreads();
    float s = 0.0f;
#pragma unroll 4
    for (unsigned k = 0; k < ITEMS; ++k) s += stage[tid * ITEMS + k];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    __syncthreads();
    if ((tid & 31) == 0) stage[tid / 32] = s;
    __syncthreads();
    if (tid < 32) {
        s = tid < nt / 32 ? stage[tid] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (tid == 0) out[blockIdx.x] = s;
    }
}
