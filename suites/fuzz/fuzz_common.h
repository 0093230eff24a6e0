// What every loopgate fuzz target asserts: a parser either accepts its input or refuses it with loopgate::Error
// (InputError included). Any other exception escapes LLVMFuzzerTestOneInput and aborts (a crash libFuzzer
// saves); a property that does not hold aborts through fuzz_require with one line saying which.
// Not here: the targets (fuzz_<parser>.cpp) or how CI runs them (CMakeLists.txt, ci/fuzz.sh).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainer/common/error.h"

namespace loopgate::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// True when `parse` returned; false when it refused the input with loopgate::Error.
template <class Parse>
bool accepts(Parse&& parse) {
  try {
    parse();
    return true;
  } catch (const Error&) {
    return false;
  }
}

inline void fuzz_require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "loopgate fuzz: property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace loopgate::fuzz
