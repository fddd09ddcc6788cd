// Block sum reduction: one float of dynamic shared memory per thread, so the
// shared memory a block needs grows with its size.
extern "C" __global__ void block_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
    extern __shared__ float partial[];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + tid;
    partial[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[0];
}
