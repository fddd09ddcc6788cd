// Real-world corpus for tests/tests/it/corpus.rs: CUB device algorithms from the
// CCCL headers shipped with the toolkit, instantiated for a few types. Only
// device code matters; the host functions exist to instantiate the kernels.
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>

template <typename T>
void instantiate(void *tmp, size_t &bytes, const T *in, T *out, int n, const int *offsets, cudaStream_t s) {
  cub::DeviceReduce::Sum(tmp, bytes, in, out, n, s);
  cub::DeviceReduce::Max(tmp, bytes, in, out, n, s);
  cub::DeviceScan::InclusiveSum(tmp, bytes, in, out, n, s);
  cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, n, s);
  cub::DeviceSegmentedReduce::Sum(tmp, bytes, in, out, 4, offsets, offsets + 1, s);
}

template <typename K>
void sort(void *tmp, size_t &bytes, const K *kin, K *kout, const int *vin, int *vout, int n, cudaStream_t s) {
  cub::DeviceRadixSort::SortKeys(tmp, bytes, kin, kout, n, 0, sizeof(K) * 8, s);
  cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, n, 0, sizeof(K) * 8, s);
}

void corpus(void *tmp, size_t &bytes, int n, cudaStream_t s) {
  instantiate<int>(tmp, bytes, nullptr, nullptr, n, nullptr, s);
  instantiate<float>(tmp, bytes, nullptr, nullptr, n, nullptr, s);
  instantiate<double>(tmp, bytes, nullptr, nullptr, n, nullptr, s);
  instantiate<long long>(tmp, bytes, nullptr, nullptr, n, nullptr, s);
  instantiate<unsigned short>(tmp, bytes, nullptr, nullptr, n, nullptr, s);
  sort<unsigned int>(tmp, bytes, nullptr, nullptr, nullptr, nullptr, n, s);
  sort<float>(tmp, bytes, nullptr, nullptr, nullptr, nullptr, n, s);
  sort<double>(tmp, bytes, nullptr, nullptr, nullptr, nullptr, n, s);
  sort<long long>(tmp, bytes, nullptr, nullptr, nullptr, nullptr, n, s);
  int *hist = nullptr;
  const unsigned char *samples = nullptr;
  cub::DeviceHistogram::HistogramEven(tmp, bytes, samples, hist, 257, 0, 256, n, s);
}
