// Digests on the device (digests.h).
#include "trainer/measure/digests.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <array>
#include <sstream>

#include "trainer/common/error.h"
#include "trainer/measure/async_copy.h"

namespace loopgate {
namespace {

// A flat tensor's bits as int32 words (a view where the element is 4 or 8 bytes).
at::Tensor words_of(const at::Tensor& flat) {
  switch (flat.element_size()) {
    case 4: return flat.view(at::kInt);
    case 8: return flat.view(at::kInt);
    case 2: return flat.view(at::kShort).to(at::kInt);
    default: return (flat.scalar_type() == at::kBool ? flat.view(at::kByte) : flat).to(at::kInt);
  }
}

}  // namespace

void DigestLog::set_phase(DigestPhase phase, int microbatch) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
  microbatch_ = microbatch;
}

void DigestLog::add(const std::string& name, const char* what, const at::Tensor& t) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  DigestRecord key;
  key.iteration = current_iteration() + 1;
  key.microbatch = microbatch_;
  key.phase = phase_;
  key.name = name;
  key.what = what;
  Pending p{std::move(key), t};
  const void* impl = t.unsafeGetTensorImpl();
  auto it = seen_.find(impl);
  if (it != seen_.end() && it->second.first == t._version()) {
    p.same_as = static_cast<long>(it->second.second);
    p.tensor = at::Tensor();
  } else {
    seen_[impl] = {t._version(), pending_.size()};
  }
  pending_.push_back(std::move(p));
}

const DigestLog::Weights& DigestLog::weights_for(const std::vector<int64_t>& lengths, const at::Device& device) {
  auto it = weights_.find(lengths);
  if (it != weights_.end()) return it->second;
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  at::Tensor w = at::empty({total}, at::kLong), s = at::empty({total}, at::kLong);
  int64_t* wp = w.data_ptr<int64_t>();
  int64_t* sp = s.data_ptr<int64_t>();
  for (size_t k = 0; k < lengths.size(); ++k)
    for (int64_t i = 0; i < lengths[k]; ++i) {
      *wp++ = static_cast<int64_t>((static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ULL | 1ULL);
      *sp++ = static_cast<int64_t>(k);
    }
  // Built once per layout on the host and staged to the device without a wait (upload: no read, no sync).
  return weights_[lengths] = {upload(w, device), upload(s, device)};
}

void DigestLog::flush() {
  std::vector<Pending> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(pending_);
    seen_.clear();
  }
  if (batch.empty()) return;
  c10::NoGradGuard no_grad;  // the tensors may be autograd's: the hash is no part of any graph
  std::map<at::ScalarType, std::vector<size_t>> by_dtype;  // one concatenation per dtype
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i].same_as < 0) by_dtype[batch[i].tensor.scalar_type()].push_back(i);
  std::vector<size_t> hashed_at(batch.size());
  for (const auto& [dtype, members] : by_dtype) {
    std::vector<at::Tensor> parts;
    std::vector<int64_t> lengths;
    for (size_t i : members) {
      parts.push_back(batch[i].tensor.reshape({-1}));
      lengths.push_back(parts.back().numel() * std::max<int64_t>(1, parts.back().element_size() / 4));
      hashed_at[i] = hashed_++;
    }
    const Weights& w = weights_for(lengths, parts.front().device());
    at::Tensor x = words_of(at::cat(parts)).to(at::kLong).mul_(w.weights);
    at::Tensor d = at::zeros({static_cast<int64_t>(members.size())}, x.options());
    digests_.push_back(d.index_add_(0, w.segments, x));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].same_as >= 0) hashed_at[i] = hashed_at[static_cast<size_t>(batch[i].same_as)];
    keys_.push_back(std::move(batch[i].key));
    source_.push_back(hashed_at[i]);
  }
}

std::vector<DigestRecord> DigestLog::collect() {
  flush();
  if (digests_.empty()) return {};
  const at::Tensor all = at::cat(digests_).to(at::kCPU);  // the one read, after the run
  const int64_t* v = all.data_ptr<int64_t>();
  std::vector<DigestRecord> out = keys_;
  for (size_t i = 0; i < out.size(); ++i) out[i].digest = static_cast<uint64_t>(v[source_[i]]);
  return out;
}

}  // namespace loopgate
