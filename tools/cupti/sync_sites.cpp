// Where the injection library charges a call (sync_sites.h).
#include "tools/cupti/sync_sites.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/cupti/py_stack.h"
#include "trainer/measure/sync_table_file.h"

namespace loopgate::cupti {
namespace {

std::vector<std::string> split_csv(const char* env) {
  const std::string text = env ? env : "";
  std::vector<std::string> out;
  for (size_t pos = 0; !text.empty() && pos != std::string::npos;) {
    const size_t next = text.find(',', pos);
    std::string item = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (!item.empty()) out.push_back(item);
    pos = next == std::string::npos ? next : next + 1;
  }
  return out;
}

}  // namespace

void SyncSites::configure() {
  skip_libs_ = split_csv(std::getenv(sync_file::kEnvSkipLibs));
  for (const std::string& s : split_csv(std::getenv(sync_file::kEnvSkipPython))) skip_python_.push_back(s);
}

bool SyncSites::skipped_library(const char* path) const {
  if (path == nullptr) return true;
  static const char* kSkip[] = {"libcuda.so", "libcudart", "libcupti", "loopgate_sync_inject"};
  for (const char* s : kSkip)
    if (std::strstr(path, s)) return true;
  for (const std::string& s : skip_libs_)
    if (std::strstr(path, s.c_str())) return true;
  return false;
}

std::string SyncSites::calling_frame() {
  void* frames[48];
  int n = backtrace(frames, 48);
  for (int i = 1; i < n; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) == 0 || skipped_library(info.dli_fname)) continue;
    std::lock_guard<std::mutex> lock(sym_mu_);
    auto hit = sym_cache_.find(frames[i]);
    if (hit != sym_cache_.end()) return hit->second;
    std::string name;
    if (info.dli_sname) {
      int status = 0;
      char* dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      name = status == 0 && dem ? dem : info.dli_sname;
      std::free(dem);
      if (name.size() > 90) name = name.substr(0, 87) + "...";
    } else {
      const char* base = info.dli_fname ? std::strrchr(info.dli_fname, '/') : nullptr;
      char buf[64];
      std::snprintf(buf, sizeof buf, "+0x%lx",
                    static_cast<unsigned long>(static_cast<char*>(frames[i]) - static_cast<char*>(info.dli_fbase)));
      name = std::string(base ? base + 1 : "?") + buf;
    }
    sym_cache_.emplace(frames[i], name);
    return name;
  }
  return "(unknown frame)";
}

std::string SyncSites::charge(const std::string& kind, const SyncRegion& region) {
  std::string site;
  const bool python = pystack::innermost_site(skip_python_, &site);
  if (!python) {
    site = region.innermost_range();
    if (site.empty()) site = calling_frame();
  }
  std::string key = site + "  [" + kind + "]";
  // The whole stack only for a site not seen before: the JSON keeps one stack per site.
  std::lock_guard<std::mutex> lock(info_mu_);
  if (info_.find(key) == info_.end()) {
    std::vector<std::string> stack;
    if (python)
      for (const pystack::Frame& f : pystack::current_frames()) stack.push_back(pystack::site_text(f));
    info_[key] = Info{site, kind, std::move(stack)};
  }
  return key;
}

SyncSites::Info SyncSites::info(const std::string& key) {
  std::lock_guard<std::mutex> lock(info_mu_);
  return info_[key];
}

}  // namespace loopgate::cupti
