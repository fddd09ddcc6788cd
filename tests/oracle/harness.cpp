// Oracle harness: runs NVIDIA's cuda_occupancy.h (the real header, found by
// the test) on inputs that the Rust test describes, and writes the header's
// answers in a compact binary form for the test to compare with occ-build.
//
// Usage: harness sweep|random|bench < input > output
//
// Every mode first reads the device table from stdin, as text:
//   N
//   major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM
//     warpSize smemPerBlock smemPerSM smemPerBlockOptin reservedSmemPerBlock   (N lines)
//
// sweep:  then "M" and M lines "staticSmem dynamicSmem". For every device, smem
//         point, registers 0..=256 and block size 1..=1024 it writes one
//         SweepRecord (runtime-style attributes: OPTIN with the most dynamic
//         smem the device allows, 1 barrier, no launch bounds), and after the
//         1024 block sizes of each (device, smem point, registers) one BestRecord
//         for cudaOccMaxPotentialOccupancyBlockSize with the same dynamic smem.
// random: then binary CaseRecords until EOF; one ResultRecord per case.
// bench:  times registers 0..=255 x block sizes 1..=1024 over every device
//         (no smem) and prints "calls ns_total checksum" as text.
//
// All binary values are little-endian (the host's order; x86 and arm64).

#include <cuda_occupancy.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

struct SweepRecord {
    uint16_t active;   // 0xFFFF: the header returned an error
    uint8_t flags;
    uint8_t gc;
    uint16_t limits[6];  // warps, regs, smem, blocks, barriers, virtual; INT_MAX -> 0xFFFF
    uint32_t allocRegs;
    uint32_t allocSmem;
};
static_assert(sizeof(SweepRecord) == 24, "SweepRecord layout");

struct BestRecord {
    uint16_t blockSize;  // 0xFFFF: error
    uint16_t blocks;     // minGridSize with numSms = 1
};
static_assert(sizeof(BestRecord) == 4, "BestRecord layout");

struct CaseRecord {
    int32_t arch, regs, staticSmem, maxDyn, barriers, fnMaxThreads, virtualRes,
        blockSize, dynSmem, carveout, cachePref, gc, tuneKind, perThread, fixed, numBlocks;
};
static_assert(sizeof(CaseRecord) == 64, "CaseRecord layout");

struct ResultRecord {
    int32_t occStatus, active, flags, limits[6], allocRegs, allocSmem, gc;
    int32_t bestStatus, bestBlock, bestBlocks;
    int32_t availStatus, availBytes;
};
static_assert(sizeof(ResultRecord) == 68, "ResultRecord layout");

std::vector<cudaOccDeviceProp> readDevices() {
    std::vector<cudaOccDeviceProp> devs;
    int n = 0;
    if (std::scanf("%d", &n) != 1) return devs;
    for (int i = 0; i < n; ++i) {
        cudaOccDeviceProp p;
        long long spb = 0, spsm = 0, optin = 0, reserved = 0;
        if (std::scanf("%d %d %d %d %d %d %d %lld %lld %lld %lld", &p.computeMajor, &p.computeMinor,
                       &p.maxThreadsPerBlock, &p.maxThreadsPerMultiprocessor, &p.regsPerBlock,
                       &p.regsPerMultiprocessor, &p.warpSize, &spb, &spsm, &optin,
                       &reserved) != 11) {
            devs.clear();
            return devs;
        }
        p.sharedMemPerBlock = (size_t)spb;
        p.sharedMemPerMultiprocessor = (size_t)spsm;
        p.sharedMemPerBlockOptin = (size_t)optin;
        p.reservedSharedMemPerBlock = (size_t)reserved;
        p.numSms = 1;
        devs.push_back(p);
    }
    return devs;
}

uint16_t clamp16(int v) {
    if (v == INT_MAX) return 0xFFFF;
    if (v < 0 || v > 0xFFFE) return 0xFFFE;
    return (uint16_t)v;
}

struct PerThread {
    size_t perThread, fixed;
    size_t operator()(int blockSize) const { return perThread * (size_t)blockSize + fixed; }
};

int sweep(const std::vector<cudaOccDeviceProp> &devs) {
    int m = 0;
    if (std::scanf("%d", &m) != 1) return 2;
    std::vector<long long> stat(m), dyn(m);
    for (int i = 0; i < m; ++i) {
        if (std::scanf("%lld %lld", &stat[i], &dyn[i]) != 2) return 2;
    }
    std::vector<SweepRecord> buf(1024);
    for (const cudaOccDeviceProp &dev : devs) {
        for (int s = 0; s < m; ++s) {
            for (int regs = 0; regs <= 256; ++regs) {
                cudaOccFuncAttributes fn;
                fn.maxThreadsPerBlock = 1024;
                fn.numRegs = regs;
                fn.sharedSizeBytes = (size_t)stat[s];
                fn.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
                fn.maxDynamicSharedSizeBytes = dev.sharedMemPerBlockOptin - (size_t)stat[s];
                fn.numBlockBarriers = 1;
                cudaOccDeviceState state;
                for (int b = 1; b <= 1024; ++b) {
                    cudaOccResult r;
                    std::memset(&r, 0, sizeof r);
                    SweepRecord &rec = buf[b - 1];
                    cudaOccError e =
                        cudaOccMaxActiveBlocksPerMultiprocessor(&r, &dev, &fn, &state, b, (size_t)dyn[s]);
                    if (e != CUDA_OCC_SUCCESS) {
                        std::memset(&rec, 0, sizeof rec);
                        rec.active = 0xFFFF;
                        continue;
                    }
                    rec.active = clamp16(r.activeBlocksPerMultiprocessor);
                    rec.flags = (uint8_t)r.limitingFactors;
                    rec.gc = (uint8_t)r.partitionedGCConfig;
                    rec.limits[0] = clamp16(r.blockLimitWarps);
                    rec.limits[1] = clamp16(r.blockLimitRegs);
                    rec.limits[2] = clamp16(r.blockLimitSharedMem);
                    rec.limits[3] = clamp16(r.blockLimitBlocks);
                    rec.limits[4] = clamp16(r.blockLimitBarriers);
                    rec.limits[5] = clamp16(r.blockLimitVirtual);
                    rec.allocRegs = (uint32_t)r.allocatedRegistersPerBlock;
                    rec.allocSmem = (uint32_t)r.allocatedSharedMemPerBlock;
                }
                std::fwrite(buf.data(), sizeof(SweepRecord), buf.size(), stdout);
                int minGrid = 0, block = 0;
                BestRecord best;
                if (cudaOccMaxPotentialOccupancyBlockSize(&minGrid, &block, &dev, &fn, &state,
                                                          (size_t)dyn[s]) != CUDA_OCC_SUCCESS) {
                    best.blockSize = 0xFFFF;
                    best.blocks = 0xFFFF;
                } else {
                    best.blockSize = (uint16_t)block;
                    best.blocks = (uint16_t)minGrid;
                }
                std::fwrite(&best, sizeof best, 1, stdout);
            }
        }
    }
    return 0;
}

int random(const std::vector<cudaOccDeviceProp> &devs) {
    // The text header ends with a newline; the binary records follow it.
    int c;
    while ((c = std::getchar()) != EOF && c != '\n') {
    }
    CaseRecord in;
    while (std::fread(&in, sizeof in, 1, stdin) == 1) {
        ResultRecord out;
        std::memset(&out, 0, sizeof out);
        if (in.arch < 0 || (size_t)in.arch >= devs.size()) return 2;
        const cudaOccDeviceProp &dev = devs[(size_t)in.arch];
        cudaOccFuncAttributes fn;
        fn.maxThreadsPerBlock = in.fnMaxThreads;
        fn.numRegs = in.regs;
        fn.sharedSizeBytes = (size_t)in.staticSmem;
        fn.partitionedGCConfig = (cudaOccPartitionedGCConfig)in.gc;
        fn.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        fn.maxDynamicSharedSizeBytes = (size_t)in.maxDyn;
        fn.numBlockBarriers = in.barriers;
        fn.virtualResourceCount = in.virtualRes;
        cudaOccDeviceState state;
        state.carveoutConfig = in.carveout;
        state.cacheConfig = (cudaOccCacheConfig)in.cachePref;

        cudaOccResult r;
        std::memset(&r, 0, sizeof r);
        out.occStatus = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &dev, &fn, &state, in.blockSize,
                                                                (size_t)in.dynSmem);
        out.active = r.activeBlocksPerMultiprocessor;
        out.flags = (int32_t)r.limitingFactors;
        out.limits[0] = r.blockLimitWarps;
        out.limits[1] = r.blockLimitRegs;
        out.limits[2] = r.blockLimitSharedMem;
        out.limits[3] = r.blockLimitBlocks;
        out.limits[4] = r.blockLimitBarriers;
        out.limits[5] = r.blockLimitVirtual;
        out.allocRegs = r.allocatedRegistersPerBlock;
        out.allocSmem = (int32_t)r.allocatedSharedMemPerBlock;
        out.gc = (int32_t)r.partitionedGCConfig;

        int minGrid = 0, block = 0;
        if (in.tuneKind == 0) {
            out.bestStatus = cudaOccMaxPotentialOccupancyBlockSize(&minGrid, &block, &dev, &fn, &state,
                                                                   (size_t)in.fixed);
        } else {
            PerThread f = {(size_t)in.perThread, (size_t)in.fixed};
            out.bestStatus = cudaOccMaxPotentialOccupancyBlockSizeVariableSMem(&minGrid, &block, &dev,
                                                                               &fn, &state, f);
        }
        out.bestBlock = block;
        out.bestBlocks = minGrid;

        size_t avail = 0;
        out.availStatus =
            cudaOccAvailableDynamicSMemPerBlock(&avail, &dev, &fn, &state, in.numBlocks, in.blockSize);
        out.availBytes = (int32_t)avail;
        std::fwrite(&out, sizeof out, 1, stdout);
    }
    return 0;
}

int bench(const std::vector<cudaOccDeviceProp> &devs) {
    long long calls = 0, checksum = 0;
    auto start = std::chrono::steady_clock::now();
    for (const cudaOccDeviceProp &dev : devs) {
        cudaOccFuncAttributes fn;
        fn.maxThreadsPerBlock = 1024;
        fn.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        fn.maxDynamicSharedSizeBytes = dev.sharedMemPerBlockOptin;
        fn.numBlockBarriers = 1;
        cudaOccDeviceState state;
        for (int regs = 0; regs <= 255; ++regs) {
            fn.numRegs = regs;
            for (int b = 1; b <= 1024; ++b) {
                cudaOccResult r;
                cudaOccMaxActiveBlocksPerMultiprocessor(&r, &dev, &fn, &state, b, 0);
                checksum += r.activeBlocksPerMultiprocessor + r.limitingFactors;
                ++calls;
            }
        }
    }
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                  .count();
    std::printf("%lld %lld %lld\n", calls, (long long)ns, checksum);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: harness sweep|random|bench < input > output\n");
        return 2;
    }
    std::vector<cudaOccDeviceProp> devs = readDevices();
    if (devs.empty()) {
        std::fprintf(stderr, "harness: could not read the device table from stdin\n");
        return 2;
    }
    if (std::strcmp(argv[1], "sweep") == 0) return sweep(devs);
    if (std::strcmp(argv[1], "random") == 0) return random(devs);
    if (std::strcmp(argv[1], "bench") == 0) return bench(devs);
    std::fprintf(stderr, "harness: unknown mode '%s'\n", argv[1]);
    return 2;
}
