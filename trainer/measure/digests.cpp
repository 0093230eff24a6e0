// Digests on the device (digests.h).
#include "trainer/measure/digests.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>

#include "trainer/common/error.h"
#include "trainer/measure/digest_hash.h"

namespace loopgate {
namespace {

// A contiguous tensor as chunks of at most kDigestChunkWords words, adding to digest `out`.
void append_chunks(const at::Tensor& t, int32_t out, std::vector<DigestChunk>& table) {
  const int64_t es = static_cast<int64_t>(t.element_size());
  const int64_t words = es >= 4 ? t.numel() * es / 4 : t.numel();
  const auto data = reinterpret_cast<int64_t>(t.data_ptr());  // an address for the hash, not a host read
  for (int64_t first = 0; first < words || first == 0; first += kDigestChunkWords)
    table.push_back({data, first, std::min(kDigestChunkWords, words - first), static_cast<int32_t>(es), out});
}

}  // namespace

DigestLog::DigestLog() {
  pending_.reserve(1024);
  batch_.reserve(1024);
  seen_.reserve(1024);
}

DigestLog::NameId DigestLog::name_id(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = ids_.try_emplace(name, static_cast<NameId>(names_.size()));
  if (added) names_.push_back(name);
  return it->second;
}

void DigestLog::set_phase(DigestPhase phase, int microbatch) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
  microbatch_ = microbatch;
}

void DigestLog::add(NameId name, const char* what, const at::Tensor& t) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  Pending& p = pending_.emplace_back(Pending{Key{current_iteration() + 1, microbatch_, phase_, name, what}, {}, {}});
  const auto [it, first] = seen_.try_emplace(t.unsafeGetTensorImpl(), t._version(), pending_.size() - 1);
  if (!first && it->second.first == t._version()) {
    p.same_as = static_cast<long>(it->second.second);
    return;
  }
  it->second = {t._version(), pending_.size() - 1};
  if (t.is_contiguous()) {
    p.tensor = t;
  } else {
    c10::NoGradGuard no_grad;  // the copy of a strided tensor is no part of any autograd graph
    p.tensor = t.contiguous();
    p.added = t;
  }
}

void DigestLog::flush() {
  std::vector<Pending>& batch = batch_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(pending_);
    seen_.clear();
  }
  if (batch.empty()) return;
  std::vector<std::pair<at::Device, std::vector<size_t>>> by_device;  // a table and a kernel per device (one mostly)
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].same_as >= 0) continue;
    const at::Device d = batch[i].tensor.device();
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == d; });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {d, {}});
    it->second.push_back(i);
  }
  std::vector<size_t> hashed_at(batch.size());
  for (const auto& [device, members] : by_device) {
    std::vector<DigestChunk> chunks;
    for (size_t k = 0; k < members.size(); ++k) {
      append_chunks(batch[members[k]].tensor, static_cast<int32_t>(k), chunks);
      hashed_at[members[k]] = hashed_++;
    }
    at::Tensor out = at::zeros({static_cast<int64_t>(members.size())}, at::TensorOptions(at::kLong).device(device));
    if (device.is_cpu()) {
      digest_chunks_host(chunks.data(), static_cast<int64_t>(chunks.size()),
                         reinterpret_cast<uint64_t*>(out.data_ptr<int64_t>()));
    } else {
#if LOOPGATE_HAS_CUDA
      digest_chunks_on_device(chunks, out);
#else
      LG_CHECK(false, "digests: a tensor on {} in a build without the GPU tier", device.str());
#endif
    }
    digests_.push_back(out);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].same_as >= 0) hashed_at[i] = hashed_at[static_cast<size_t>(batch[i].same_as)];
    keys_.push_back(batch[i].key);
    source_.push_back(hashed_at[i]);
  }
  batch.clear();  // the tensors go back now, the capacity stays
}

std::vector<DigestRecord> DigestLog::collect() {
  flush();
  if (digests_.empty()) return {};
  const at::Tensor all = at::cat(digests_).to(at::kCPU);  // the one read, after the run
  const int64_t* v = all.data_ptr<int64_t>();
  std::vector<DigestRecord> out(keys_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const Key& k = keys_[i];
    out[i] = {k.iteration, k.microbatch, k.phase, names_[static_cast<size_t>(k.name)], k.what,
              static_cast<uint64_t>(v[source_[i]])};
  }
  return out;
}

}  // namespace loopgate
