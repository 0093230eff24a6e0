// Where the injection library (sync_inject.cpp) charges a counted call: the innermost Python frame outside the
// skipped paths (py_stack.h), else the innermost named NVTX range open on the thread (sync_region.h), else the
// first native frame outside libcuda, libcudart, CUPTI and this library (dladdr, demangled); and each site's kind
// and first Python stack, for the JSON. LOOPGATE_PY_SKIP and LOOPGATE_CUPTI_SKIP add paths and libraries to skip.
#pragma once
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/cupti/sync_region.h"

namespace loopgate::cupti {

class SyncSites {
 public:
  struct Info {
    std::string site, kind;
    std::vector<std::string> stack;  // the Python stack of the site's first counted call (innermost first)
  };

  void configure();  // the skip lists, from the environment
  // The site of the calling thread's current call, as the table keys it: "site  [kind]".
  std::string charge(const std::string& kind, const SyncRegion& region);
  Info info(const std::string& key);

 private:
  bool skipped_library(const char* path) const;
  std::string calling_frame();

  std::vector<std::string> skip_libs_;
  std::vector<std::string> skip_python_ = {"/torch/", "loopgate_pyshim"};
  std::mutex sym_mu_;
  std::unordered_map<void*, std::string> sym_cache_;
  std::mutex info_mu_;
  std::unordered_map<std::string, Info> info_;  // keyed as the table is
};

}  // namespace loopgate::cupti
