// Row softmax: one block per row, block-wide max and sum through shared
// memory with several barriers per row.
extern "C" __global__ void row_softmax(const float* __restrict__ in, float* __restrict__ out, int cols) {
    __shared__ float scratch[1024];
    const float* row = in + (size_t)blockIdx.x * cols;
    float* dst = out + (size_t)blockIdx.x * cols;
    float m = -3.402823466e38f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    scratch[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        __syncthreads();
    }
    m = scratch[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(row[c] - m);
    scratch[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    sum = scratch[0];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = __expf(row[c] - m) / sum;
}
