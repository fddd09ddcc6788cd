// All-pairs n-body forces, unrolled so each thread keeps many bodies in
// registers; __launch_bounds__ caps the block at 256 threads.
#define UNROLL 16

extern "C" __global__ void __launch_bounds__(256) nbody_forces(const float4* __restrict__ pos, float3* __restrict__ acc, int n, float soft) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 p = pos[i];
    float ax[UNROLL] = {0}, ay[UNROLL] = {0}, az[UNROLL] = {0};
    for (int j = 0; j + UNROLL <= n; j += UNROLL) {
        float4 q[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) q[u] = pos[j + u];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float dx = q[u].x - p.x, dy = q[u].y - p.y, dz = q[u].z - p.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + soft);
            float s = q[u].w * inv * inv * inv;
            ax[u] += dx * s; ay[u] += dy * s; az[u] += dz * s;
        }
    }
    float3 a = make_float3(0.f, 0.f, 0.f);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) { a.x += ax[u]; a.y += ay[u]; a.z += az[u]; }
    acc[i] = a;
}
