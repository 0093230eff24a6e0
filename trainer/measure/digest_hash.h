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

// Word k of chunk c (word first_word + k of its tensor).
LG_HOST_DEVICE inline uint32_t digest_word(const DigestChunk& c, int64_t k) {
  const int64_t i = c.first_word + k;
  switch (c.elem_size) {
    case 1: return reinterpret_cast<const uint8_t*>(c.data)[i];
    case 2: return reinterpret_cast<const uint16_t*>(c.data)[i];
    default: return reinterpret_cast<const uint32_t*>(c.data)[i];
  }
}

// Word k of chunk c times its weight: the definition, term by term (the tests hold the sums below to it).
LG_HOST_DEVICE inline uint64_t digest_term(const DigestChunk& c, int64_t k) {
  return static_cast<uint64_t>(digest_word(c, k)) * digest_weight(c.first_word + k);
}

// The same sum as the kernel and the host loop compute it. The multiplier is odd, so (i + 1) * it is even exactly
// when i is odd: weight(i) = (i + 1) * 0x9E37... + [i odd]. Over a chunk's words i = f + k that makes
//   sum w_i weight(i) = 0x9E37... * ((f + 1) A + K) + O,  A = sum w_k,  K = sum k w_k,  O = sum of w_i, i odd,
// mod 2^64. With k < 2^16 and w < 2^32 a word costs one 32 x 32 -> 64-bit multiply-add, not two 64-bit
// multiplies (at 4096x4x2048 on an H200 both forms hash at memory speed: docs/performance.md, "Digests' cost").
struct DigestSums {
  uint64_t a = 0;    // sum of w_k
  uint64_t k = 0;    // sum of k * w_k
  uint64_t odd = 0;  // sum of w_k over odd k (k counted from the chunk's first word)
};

LG_HOST_DEVICE inline void digest_add_word(DigestSums& s, uint32_t w, uint32_t k) {
  s.a += w;
  s.k += static_cast<uint64_t>(k) * w;
  s.odd += (k & 1u) ? w : 0u;
}

// 16 bytes (four 32-bit loads, little-endian) holding words k0, k0 + 1, ... of width `unit`; k0 is even (a vector
// starts at a multiple of its word count). Narrow words are summed in 32 bits first (8 x 2^16 and 120 x 2^8 fit).
LG_HOST_DEVICE inline void digest_add_vector(DigestSums& s, const uint32_t x[4], uint32_t k0, int64_t unit) {
  if (unit == 4) {
    for (uint32_t j = 0; j < 4; ++j) digest_add_word(s, x[j], k0 + j);
    return;
  }
  uint32_t a = 0, kw = 0, odd = 0;  // over this vector, kw by the word's place j in it
  if (unit == 2) {
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t lo = x[j] & 0xffffu, hi = x[j] >> 16;
      a += lo + hi;
      kw += 2 * j * lo + (2 * j + 1) * hi;
      odd += hi;
    }
  } else {
    for (uint32_t j = 0; j < 16; ++j) {
      const uint32_t b = (x[j / 4] >> (8 * (j % 4))) & 0xffu;
      a += b;
      kw += j * b;
      odd += (j & 1u) ? b : 0u;
    }
  }
  s.a += a;
  s.k += static_cast<uint64_t>(k0) * a + kw;
  s.odd += odd;
}

// A chunk's (or a share of it's) sums as its part of the digest; the parts add up.
LG_HOST_DEVICE inline uint64_t digest_from_sums(const DigestSums& s, int64_t first_word) {
  const uint64_t odd = (first_word & 1) ? s.a - s.odd : s.odd;  // odd k is even i when f is odd
  return 0x9E3779B97F4A7C15ULL * ((static_cast<uint64_t>(first_word) + 1) * s.a + s.k) + odd;
}

// Host memory: every chunk's terms added into out[chunk.out] (out zeroed by the caller).
inline void digest_chunks_host(const DigestChunk* chunks, int64_t n, uint64_t* out) {
  for (int64_t c = 0; c < n; ++c) {
    DigestSums s;
    for (int64_t k = 0; k < chunks[c].words; ++k)
      digest_add_word(s, digest_word(chunks[c], k), static_cast<uint32_t>(k));
    out[chunks[c].out] += digest_from_sums(s, chunks[c].first_word);
  }
}

// Device memory: the same, one kernel on `stream` (a cudaStream_t); `chunks` and `out` in device memory. Returns
// the launch's cudaError_t as an int (0: launched).
int digest_chunks_cuda(const DigestChunk* chunks, int64_t n, uint64_t* out, void* stream);

}  // namespace loopgate
