// The digests' hash (digests.h), one definition for the host and the device (digest_hash.cu): a tensor's bits as
// words w_0..w_n-1 — 32-bit words for 4- and 8-byte elements, one word per element for 2- and 1-byte ones — and
// the digest sum over i of w_i * ((i + 1) * 0x9E3779B97F4A7C15 | 1) mod 2^64. Each weight is odd, so one changed
// word changes the sum, and the weights differ by position, so two swapped words do too. No LibTorch here: the
// kernel's translation unit stays a plain CUDA one.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define LG_HOST_DEVICE __host__ __device__
#else
#define LG_HOST_DEVICE
#endif

namespace loopgate {

// One tensor's words [first_word, first_word + words) and the digest they add to: the table a flush hands to the
// host loop or to the kernel (one CUDA block per chunk). 32 bytes each, so the table is an int64 tensor [n, 4].
struct DigestChunk {
  int64_t data;        // the tensor's first byte (contiguous)
  int64_t first_word;  // the word this chunk starts at, counted from the tensor's first
  int64_t words;       // how many of them
  int32_t elem_size;   // 1, 2, 4 or 8 bytes
  int32_t out;         // the digest it adds to
};
static_assert(sizeof(DigestChunk) == 32, "the table is read as int64 [n, 4]");
constexpr int64_t kDigestChunkWords = int64_t{1} << 16;

// Word i's weight: odd, and different at every position.
LG_HOST_DEVICE inline uint64_t digest_weight(int64_t i) {
  return (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ULL | 1ULL;
}

// Bytes per word: 4 for 4- and 8-byte elements, the element's size below that.
LG_HOST_DEVICE inline int64_t digest_word_bytes(int32_t elem_size) { return elem_size >= 4 ? 4 : elem_size; }

// Word k of chunk c, times its weight.
LG_HOST_DEVICE inline uint64_t digest_term(const DigestChunk& c, int64_t k) {
  const int64_t i = c.first_word + k;
  uint32_t w;
  switch (c.elem_size) {
    case 1: w = reinterpret_cast<const uint8_t*>(c.data)[i]; break;
    case 2: w = reinterpret_cast<const uint16_t*>(c.data)[i]; break;
    default: w = reinterpret_cast<const uint32_t*>(c.data)[i]; break;
  }
  return static_cast<uint64_t>(w) * digest_weight(i);
}

// The terms of 16 bytes (four 32-bit loads) holding words i0, i0 + 1, ... of width `unit`, little-endian: the
// kernel's aligned path; the host loop's digest_term word by word must give the same sum (test_digests.cpp).
LG_HOST_DEVICE inline uint64_t digest_vector_terms(const uint32_t w[4], int64_t i0, int64_t unit) {
  uint64_t sum = 0;
  if (unit == 4) {
    for (int j = 0; j < 4; ++j) sum += static_cast<uint64_t>(w[j]) * digest_weight(i0 + j);
  } else if (unit == 2) {
    for (int j = 0; j < 4; ++j)
      sum += static_cast<uint64_t>(w[j] & 0xffffu) * digest_weight(i0 + 2 * j) +
             static_cast<uint64_t>(w[j] >> 16) * digest_weight(i0 + 2 * j + 1);
  } else {
    for (int j = 0; j < 16; ++j)
      sum += static_cast<uint64_t>((w[j / 4] >> (8 * (j % 4))) & 0xffu) * digest_weight(i0 + j);
  }
  return sum;
}

// Host memory: every chunk's terms added into out[chunk.out] (out zeroed by the caller).
inline void digest_chunks_host(const DigestChunk* chunks, int64_t n, uint64_t* out) {
  for (int64_t c = 0; c < n; ++c) {
    uint64_t sum = 0;
    for (int64_t k = 0; k < chunks[c].words; ++k) sum += digest_term(chunks[c], k);
    out[chunks[c].out] += sum;
  }
}

// Device memory: the same, one kernel on `stream` (a cudaStream_t); `chunks` and `out` in device memory. Returns
// the launch's cudaError_t as an int (0: launched).
int digest_chunks_cuda(const DigestChunk* chunks, int64_t n, uint64_t* out, void* stream);

}  // namespace loopgate
