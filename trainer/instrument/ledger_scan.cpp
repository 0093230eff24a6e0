// The ledger's source scan (ledger.h): every spelling of a direct device read LibTorch and CUDA offer, the
// explicit allowlist of files that may read (each with its reason), and the scan of every folder of trainer/.
// It sees spellings, not call graphs: what it cannot see is listed in docs/gates.md ("loop_code") and pinned by
// the planted-read tests (fixtures/loop_checks.cpp). Not here: counting reads (ledger.cpp) or any gate verdict.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "trainer/instrument/ledger.h"

namespace loopgate {
namespace {

// ---- the patterns ----

struct Pattern {
  HostReadPattern info;
  std::regex re;
  std::vector<std::string> needles;  // the regex can match only where one of these occurs (a cheap pre-filter)
};

// A member call on a tensor: `.name` or `->name`, spaces allowed around the operator.
#define LG_MEMBER R"((\.|->)\s*)"
// A CPU device named in the same statement: kCPU, DeviceType::CPU, or a "cpu" literal (the lexer keeps those).
#define LG_CPU R"((\bkCPU\b|\bDeviceType::CPU\b|"cpu))"

// The regex can match only where one of these words occurs: a pre-filter that skips most (file, pattern)
// pairs. Taken from the pattern's name; the planted-read tests prove that every pattern still finds its lines.
std::vector<std::string> needles_of(const std::string& name) {
  if (name.find("CPU") != std::string::npos) return {"CPU", "\"cpu"};  // kCPU, DeviceType::CPU, "cpu"
  static const std::regex kWord(R"([A-Za-z_][A-Za-z0-9_]*)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), kWord); it != std::sregex_iterator(); ++it)
    if (it->str() != "at" && it->str() != "T" && it->str() != "cu") out.push_back(it->str());
  return out;
}

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> p = [] {
    const std::vector<std::pair<HostReadPattern, const char*>> table = {
        // -- device-to-host reads of values --
        {{"'.item()'", "reads one element to the host (c10::Scalar): a device synchronize"}, LG_MEMBER R"(item\s*\()"},
        {{"'.item<T>()'", "reads one element to the host"}, LG_MEMBER R"(item\s*<)"},
        {{"'.tolist()'", "reads every element to the host"}, LG_MEMBER R"(tolist\s*\()"},
        {{"'data_ptr'", "a raw pointer to the tensor's memory: dereferenced on the host, a read"},
         R"(\bdata_ptr\s*[<(])"},
        {{"'const_data_ptr'", "a raw pointer to the tensor's memory (LibTorch 2.x)"}, R"(\bconst_data_ptr\s*[<(])"},
        {{"'mutable_data_ptr'", "a raw pointer to the tensor's memory (LibTorch 2.x)"}, R"(\bmutable_data_ptr\s*[<(])"},
        {{"'.data<T>()'", "a raw pointer to the tensor's memory (deprecated spelling)"}, LG_MEMBER R"(data\s*<)"},
        {{"'.accessor<'", "element access on the host"}, LG_MEMBER R"(accessor\s*<)"},
        {{"'.to(<CPU device>)'", "a device-to-host copy (kCPU, DeviceType::CPU, \"cpu\", Device(...CPU...), options)"},
         LG_MEMBER R"(to\s*\([^;{}]*)" LG_CPU},
        {{"'.cpu()'", "a device-to-host copy"}, LG_MEMBER R"(cpu\s*\()"},
        {{"'.copy_(' into a CPU tensor", "a device-to-host copy into a tensor made on the CPU in the same statement"},
         LG_CPU R"([^;{}]*(\.|->)\s*copy_\s*\()"},
        {{"'is_nonzero'", "the truth value of a one-element tensor, read on the host (Python's bool(t))"},
         R"(\bis_nonzero\s*\()"},
        {{"'_local_scalar_dense'", "the op behind item()"}, R"(\b_local_scalar_dense\s*\()"},
        {{"'.equal('", "compares two tensors and returns a host bool"}, R"(((\.|->)\s*|\b(at|torch)::)equal\s*\()"},
        {{"'allclose'", "compares two tensors and returns a host bool"}, R"(\ballclose\s*\()"},
        {{"'nonzero / argwhere / masked_select'", "the output's size is read from the device"},
         R"(\b(nonzero|argwhere|masked_select)\s*\()"},
        {{"'unique'", "the output's size is read from the device"},
         R"(((\.|->)\s*|\b(at|torch)::)_?unique(_consecutive|_dim|_dim_consecutive)?\s*\()"},
        {{"'at::print'", "prints the tensor's values: reads them"}, R"(\b(at|torch)::print\s*\()"},
        // -- host-to-device copies from pageable memory (Megatron's torch.tensor([x], device=...)) --
        {{"'at::tensor('", "a host tensor from host values: pageable host-to-device copy when moved"},
         R"(\bat::tensor\s*\()"},
        {{"'torch::tensor('", "a host tensor from host values: pageable host-to-device copy when moved"},
         R"(\btorch::tensor\s*\()"},
        {{"'from_blob'", "a tensor over host memory: pageable host-to-device copy when moved"}, R"(\bfrom_blob\s*\()"},
        // -- the CUDA runtime and driver, and LibTorch's wrappers of them --
        {{"'cudaMemcpy'", "a synchronous copy (the Async forms block too when the host side is pageable)"},
         R"(\bcudaMemcpy\w*\s*\()"},
        {{"'cuMemcpy'", "a driver copy (synchronous, or blocking on pageable memory)"}, R"(\bcuMemcpy\w*\s*\()"},
        {{"'cudaStreamSynchronize'", "waits for a stream"}, R"(\bcudaStreamSynchronize\s*\()"},
        {{"'cudaDeviceSynchronize'", "waits for the device"}, R"(\bcudaDeviceSynchronize\s*\()"},
        {{"'cudaEventSynchronize'", "waits for an event"}, R"(\bcudaEventSynchronize\s*\()"},
        {{"'cu*Synchronize'", "the driver's stream, context or event wait"},
         R"(\bcu(Stream|Ctx|Event)Synchronize\w*\s*\()"},
        {{"'.synchronize()'", "a stream's, event's or the device's wait (CUDAStream, CUDAEvent, torch::cuda)"},
         R"((\.|->|::)\s*synchronize\s*\()"},
        {{"'device_synchronize / stream_synchronize'", "c10::cuda's device and stream waits"},
         R"(\b(device|stream)_synchronize\s*\()"},
        {{"'cudaFree / emptyCache'", "frees device memory: an implicit device synchronize"},
         R"(\b(cudaFree|cudaFreeHost|emptyCache)\s*\()"},
    };
    std::vector<Pattern> out;
    for (const auto& [info, re] : table) out.push_back({info, std::regex(re), needles_of(info.name)});
    return out;
  }();
  return p;
}

#undef LG_MEMBER
#undef LG_CPU

// ---- the allowlist: exact files, each with its reason ----

const std::vector<HostReadAllowance> kAllowlist = {
    {"instrument/ledger.cpp", {"'.to(<CPU device>)'", "'data_ptr'", "'at::tensor('"},
     "the ledger itself: every counted read and device scalar is made here"},
    {"instrument/timers.cpp", {"'.synchronize()'", "'at::tensor('", "'.to(<CPU device>)'", "'data_ptr'"},
     "implements the timers: EventTimer waits on its device events (EventSource::synchronize; the loop's sites "
     "count each wait at Site::kTimers), and the registry's gather without a ledger (unit tests: the loop always "
     "passes one) reads directly"},
    {"instrument/device_cuda.cpp", {"'cudaEventSynchronize'", "'cudaDeviceSynchronize'"},
     "implements the CUDA event source (cudaEventSynchronize) and the device synchronize behind the baseline's "
     "HostTimer (counted at Site::kTimers by its caller)"},
    {"instrument/capture_cuda.cpp", {"'cudaStreamSynchronize'"},
     "the CUDA-graph capture probe and the iteration graph: each synchronizes its own capture stream after a "
     "capture, a reset or at destruction, outside any counted iteration"},
    {"parallel/comm_mpi.cpp", {"'data_ptr'"},
     "the MPI backend hands tensor memory to MPI: a pointer, not a read; MPI runs on the CPU device, whose memory "
     "is the host's"},
    {"parallel/comm_nccl.cpp", {"'data_ptr'"},
     "the NCCL backend hands device pointers to NCCL, which reads them on the stream: no host read"},
};

// ---- the lexer: comments out, string contents blanked, line structure kept ----

bool is_cpu_literal(const std::string& s) {
  static const std::regex kCpu(R"(cpu(:[0-9]+)?)");
  return std::regex_match(s, kCpu);
}

// `text` with comments replaced by spaces and each string or character literal's contents removed (a literal
// naming the CPU device kept); newlines stay where they were, so offsets map to the same lines.
std::string code_view(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const size_t n = text.size();
  size_t i = 0;
  auto blank_until = [&](const std::string& end) {  // a comment: spaces, newlines kept
    const size_t stop = text.find(end, i);
    const size_t e = stop == std::string::npos ? n : stop + end.size();
    for (; i < e; ++i) out += text[i] == '\n' ? '\n' : ' ';
  };
  while (i < n) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      blank_until("\n");
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      blank_until("*/");
    } else if (c == '"' && i > 0 && text[i - 1] == 'R') {  // raw string R"delim( ... )delim"
      const size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 1, open == std::string::npos ? 0 : open - i - 1) + "\"";
      const size_t stop = open == std::string::npos ? n : text.find(close, open);
      const size_t e = stop == std::string::npos ? n : stop + close.size();
      out += "\"\"";
      for (; i < e; ++i)
        if (text[i] == '\n') out += '\n';
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(text[i - 1]))))) {
      // A string or character literal (a quote after a digit is a digit separator: 1'000).
      std::string body;
      size_t j = i + 1;
      for (; j < n && text[j] != c && text[j] != '\n'; ++j) {
        if (text[j] == '\\' && j + 1 < n) body += text[j++];
        body += text[j];
      }
      out += c;
      if (c == '"' && is_cpu_literal(body)) out += body;
      out += c;
      i = j < n && text[j] == c ? j + 1 : j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool is_source(const std::filesystem::path& p) {
  static const char* const kExt[] = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inl"};
  const std::string e = p.extension().string();
  return std::any_of(std::begin(kExt), std::end(kExt), [&](const char* x) { return e == x; });
}

}  // namespace

const std::vector<HostReadPattern>& host_read_patterns() {
  static const std::vector<HostReadPattern> out = [] {
    std::vector<HostReadPattern> v;
    for (const Pattern& p : patterns()) v.push_back(p.info);
    return v;
  }();
  return out;
}

const std::vector<HostReadAllowance>& host_read_allowlist() { return kAllowlist; }

std::vector<HostReadViolation> scan_for_host_reads(const std::string& file, const std::string& text) {
  const std::string code = code_view(text);  // the same lines as `text`, shorter where literals were emptied
  std::vector<size_t> code_lines = {0};
  for (size_t i = 0; i < code.size(); ++i)
    if (code[i] == '\n') code_lines.push_back(i + 1);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  auto line_of = [&](size_t offset) {
    return static_cast<int>(std::upper_bound(code_lines.begin(), code_lines.end(), offset) - code_lines.begin());
  };
  std::vector<HostReadViolation> out;
  for (const Pattern& p : patterns()) {
    if (std::none_of(p.needles.begin(), p.needles.end(), [&](const std::string& w) { return code.find(w) != std::string::npos; }))
      continue;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), p.re); it != std::sregex_iterator(); ++it) {
      const int line = line_of(static_cast<size_t>(it->position(0)));
      out.push_back({file, line, p.info.name, line <= static_cast<int>(lines.size()) ? lines[line - 1] : ""});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.line < b.line; });
  return out;
}

TrainerScan scan_trainer_for_host_reads(const std::string& trainer_dir) {
  namespace fs = std::filesystem;
  TrainerScan scan;
  std::error_code ec;
  if (!fs::is_directory(trainer_dir, ec)) {
    scan.violations.push_back({trainer_dir, 0, "<missing directory>", "the trainer's sources are not there"});
    return scan;
  }
  std::map<std::string, const HostReadAllowance*> allowance;
  std::map<std::pair<std::string, std::string>, int> hits;  // (file, spelling) the allowlist permits -> hits
  for (const HostReadAllowance& a : kAllowlist) {
    allowance[a.file] = &a;
    for (const std::string& pat : a.patterns) hits[{a.file, pat}] = 0;
  }
  scan.folders["."] = 0;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(trainer_dir)) {
    const fs::path rel = fs::relative(entry.path(), trainer_dir);
    if (entry.is_directory()) scan.folders[rel.string()] += 0;
    if (entry.is_regular_file() && is_source(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // a stable report, whatever order the directory gives
  for (const fs::path& path : files) {
    const std::string rel = fs::relative(path, trainer_dir).generic_string();
    const std::string folder = fs::path(rel).parent_path().string();
    ++scan.folders[folder.empty() ? "." : folder];
    ++scan.files;
    for (HostReadViolation& v : scan_for_host_reads(rel, read_file(path))) {
      auto permitted = hits.find({rel, v.pattern});
      if (permitted == hits.end()) {
        if (allowance.count(rel)) v.pattern += " (not a spelling its allowlist entry permits)";
        scan.violations.push_back(std::move(v));
      } else {
        ++permitted->second;
        scan.allowed.push_back(std::move(v));
      }
    }
  }
  if (scan.files == 0)
    scan.violations.push_back({trainer_dir, 0, "<no source files>", "nothing to scan: not the trainer's sources"});
  for (const auto& [key, n] : hits)
    if (n == 0) scan.stale.push_back(key.first + " " + key.second);
  return scan;
}

}  // namespace loopgate
