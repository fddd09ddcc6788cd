// Batched tiled transpose: each block transposes one TILE x TILE tile of
// PLANES matrices at once through a padded static shared-memory tile, so
// shared memory, not threads, bounds how many blocks share an SM.
#include "tile.cuh"

namespace linalg {
template <typename T, int TILE>
__global__ void transpose(const T* __restrict__ in, T* __restrict__ out, int rows, int cols) {
    __shared__ T tile[PLANES][TILE][TILE + 1];
    const size_t plane = (size_t)rows * cols;
    int x = blockIdx.x * TILE + threadIdx.x;
    for (int p = 0; p < PLANES; ++p)
        for (int dy = threadIdx.y; dy < TILE; dy += blockDim.y) {
            int y = blockIdx.y * TILE + dy;
            if (x < cols && y < rows) tile[p][dy][threadIdx.x] = in[p * plane + (size_t)y * cols + x];
        }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    for (int p = 0; p < PLANES; ++p)
        for (int dy = threadIdx.y; dy < TILE; dy += blockDim.y) {
            int y = blockIdx.x * TILE + dy;
            if (x < rows && y < cols) out[p * plane + (size_t)y * rows + x] = tile[p][threadIdx.x][dy];
        }
}
template __global__ void transpose<float, 32>(const float*, float*, int, int);
}  // namespace linalg
