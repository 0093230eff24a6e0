// The digests' kernel (digest_hash.h): one block per chunk; each thread reads a strided share of the chunk as 16-byte
// vectors (the words inside split out by width, so bf16 activations stream at full width), the unaligned rest word
// by word, into DigestSums (one 32-bit multiply-add a word); then its part of the digest, a block sum and one 64-bit
// atomic add into the chunk's digest. Addition mod 2^64 is exact and commutative, so the order the blocks land in
// changes nothing: the same bits give the same digest, on every run.
#include <cuda_runtime.h>

#include <cstdint>

#include "trainer/measure/digest_hash.h"

namespace loopgate {
namespace {

constexpr int kThreads = 256;

__global__ void digest_chunks_kernel(const DigestChunk* chunks, unsigned long long* out) {
  const DigestChunk c = chunks[blockIdx.x];
  const int64_t unit = digest_word_bytes(c.elem_size), per_vector = 16 / unit;
  const char* first = reinterpret_cast<const char*>(c.data) + c.first_word * unit;
  DigestSums s;
  int64_t vectors = 0;
  if (reinterpret_cast<uintptr_t>(first) % 16 == 0) {
    vectors = c.words / per_vector;
    const uint4* v = reinterpret_cast<const uint4*>(first);
    for (int64_t k = threadIdx.x; k < vectors; k += kThreads) {
      const uint4 x = v[k];
      const uint32_t w[4] = {x.x, x.y, x.z, x.w};
      digest_add_vector(s, w, static_cast<uint32_t>(k * per_vector), unit);
    }
  }
  for (int64_t k = vectors * per_vector + threadIdx.x; k < c.words; k += kThreads)
    digest_add_word(s, digest_word(c, k), static_cast<uint32_t>(k));
  uint64_t sum = digest_from_sums(s, c.first_word);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  __shared__ uint64_t warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    atomicAdd(out + c.out, static_cast<unsigned long long>(total));
  }
}

}  // namespace

int digest_chunks_cuda(const DigestChunk* chunks, int64_t n, uint64_t* out, void* stream) {
  if (n == 0) return 0;
  digest_chunks_kernel<<<static_cast<unsigned>(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      chunks, reinterpret_cast<unsigned long long*>(out));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace loopgate
