// GradBuffer: layout of params into buckets, the post-accumulate hook that marks grads ready, and the
// per-bucket sync (callbacks, then scale by 1/dp and all-reduce SUM: Megatron gradient_scaling_factor).
//
// Why a hook on the grad accumulator: Tensor::register_hook fires BEFORE the grad is added to .grad, and
// register_post_accumulate_grad_hook does not exist in LibTorch 1.13. A post-hook on the param's
// AccumulateGrad node (what Megatron registers: param.expand_as(param).grad_fn.next_functions[0][0]) runs
// after the accumulation in both 1.13 and 2.x. We keep the node alive so every graph reuses it.
#include "trainer/optim/grad_buffer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "trainer/common/error.h"

namespace loopgate {

// ---- state shared with the hooks (they hold it weakly: a destroyed buffer makes them no-ops) ----

struct GradBuffer::State {
  std::vector<at::Tensor> params;        // registration order
  std::vector<at::Tensor> grad_views;    // registration order, shaped like the param
  std::vector<int> bucket_of;            // param -> bucket
  std::vector<std::vector<int>> bucket_members;
  std::vector<at::Tensor> bucket_views;
  at::Tensor data;
  CommPtr dp;
  GradBuffer* owner = nullptr;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;

  bool sync_enabled = true;
  std::vector<char> param_ready;
  std::vector<int> bucket_ready_count;
  std::vector<char> bucket_reduced;
  int reduced_by_hook = 0;

  void reset_ready() {
    std::fill(param_ready.begin(), param_ready.end(), 0);
    std::fill(bucket_ready_count.begin(), bucket_ready_count.end(), 0);
    std::fill(bucket_reduced.begin(), bucket_reduced.end(), 0);
    reduced_by_hook = 0;
  }

  // A non-fp32 param (or a .grad someone replaced) accumulates outside the buffer: fold it in and reset it.
  void fold_into_buffer(int i) {
    at::Tensor& g = params[i].mutable_grad();
    if (!g.defined() || g.is_same(grad_views[i])) return;
    grad_views[i].add_(g);  // Megatron's main_grad.add_(grad): fp32 += bf16 in one kernel (the cast is exact)
    if (params[i].scalar_type() == at::kFloat) {
      g = grad_views[i];
    } else {
      g.reset();
    }
  }

  // Megatron start_grad_sync: check_grads on the local grads, then the DP reduction.
  void reduce_bucket(int k) {
    at::Tensor view = bucket_views[k];
    if (owner->before_bucket_ready) owner->before_bucket_ready(k, view);
    if (owner->on_bucket_ready) owner->on_bucket_ready(k, view);
    if (dp->size() > 1) {
      view.mul_(1.0 / dp->size());
      dp->all_reduce(view);
    }
    bucket_reduced[k] = 1;
  }

  void on_grad_accumulated(int i) {
    fold_into_buffer(i);
    if (!sync_enabled || param_ready[i]) return;
    param_ready[i] = 1;
    int k = bucket_of[i];
    if (++bucket_ready_count[k] == static_cast<int>(bucket_members[k].size()) && !bucket_reduced[k]) {
      reduce_bucket(k);
      ++reduced_by_hook;
    }
  }
};

namespace {

struct GradReadyHook : torch::autograd::FunctionPostHook {
  GradReadyHook(std::weak_ptr<GradBuffer::State> state, int index) : state_(std::move(state)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    if (auto s = state_.lock()) s->on_grad_accumulated(index_);
    return outputs;
  }
  std::weak_ptr<GradBuffer::State> state_;
  int index_;
};

}  // namespace

// ---- layout: reverse registration order, buckets closed at >= bucket_size (Megatron _does_param_require_new_bucket) ----

BucketLayout layout_grad_buckets(const std::vector<int64_t>& numels, int64_t bucket_size) {
  LG_CHECK(bucket_size >= 1, "GradBuffer: bucket_size {} must be >= 1", bucket_size);
  const int n = static_cast<int>(numels.size());
  BucketLayout b;
  b.offset.assign(n, 0);
  b.bucket_of.assign(n, -1);
  int64_t bucket_start = 0;
  std::vector<int> current;
  for (int i = n - 1; i >= 0; --i) {
    b.offset[i] = b.total;
    b.total += numels[i];
    current.push_back(i);
    if (b.total - bucket_start >= bucket_size || i == 0) {
      for (int j : current) b.bucket_of[j] = static_cast<int>(b.members.size());
      b.members.push_back(current);
      b.ranges.emplace_back(bucket_start, b.total - bucket_start);
      current.clear();
      bucket_start = b.total;
    }
  }
  return b;
}

GradBuffer::GradBuffer(const Params& params, CommPtr dp, GradBufferConfig config) : state_(std::make_shared<State>()) {
  LG_CHECK(dp != nullptr, "GradBuffer: no data-parallel group");
  State& s = *state_;
  s.dp = std::move(dp);
  s.owner = this;
  const int n = static_cast<int>(params.size());
  std::vector<int64_t> numels;
  for (const Param& p : params) numels.push_back(p.value.numel());
  const BucketLayout b = layout_grad_buckets(numels, config.bucket_size);
  const std::vector<int64_t>& offset = b.offset;
  const int64_t total = b.total;
  s.bucket_of = b.bucket_of;
  s.bucket_members = b.members;
  const auto& bucket_ranges = b.ranges;
  const c10::Device device = n > 0 ? params[0].value.device() : c10::Device(c10::kCPU);
  s.data = at::zeros({total}, at::TensorOptions().dtype(at::kFloat).device(device));  // fp32 grads
  for (auto [start, len] : bucket_ranges) s.bucket_views.push_back(s.data.narrow(0, start, len));
  for (int i = 0; i < n; ++i) {
    const at::Tensor& p = params[i].value;
    LG_CHECK(p.requires_grad() && p.is_leaf(), "GradBuffer: param {} is not a leaf that requires grad",
             params[i].name);
    s.params.push_back(p);
    s.grad_views.push_back(s.data.narrow(0, offset[i], p.numel()).view(p.sizes()));
    // fp32: autograd accumulates straight into the buffer (grad is defined, grad mode is off in backward).
    if (p.scalar_type() == at::kFloat) s.params[i].mutable_grad() = s.grad_views[i];
    auto acc = torch::autograd::impl::grad_accumulator(p);
    acc->add_post_hook(std::make_unique<GradReadyHook>(state_, i));
    s.accumulators.push_back(std::move(acc));
  }
  s.param_ready.assign(n, 0);
  s.bucket_ready_count.assign(s.bucket_members.size(), 0);
  s.bucket_reduced.assign(s.bucket_members.size(), 0);
}

GradBuffer::~GradBuffer() { state_->owner = nullptr; }

// ---- per-step control ----

void GradBuffer::zero() {
  state_->data.zero_();
  for (size_t i = 0; i < state_->params.size(); ++i) {
    at::Tensor& g = state_->params[i].mutable_grad();
    if (state_->params[i].scalar_type() == at::kFloat) g = state_->grad_views[i];
    else g.reset();
  }
  state_->reset_ready();
}

void GradBuffer::set_grad_sync(bool enabled) { state_->sync_enabled = enabled; }
bool GradBuffer::grad_sync() const { return state_->sync_enabled; }

void GradBuffer::finish_grad_sync() {
  State& s = *state_;
  for (size_t i = 0; i < s.params.size(); ++i) s.fold_into_buffer(static_cast<int>(i));
  for (int k = 0; k < num_buckets(); ++k)
    if (!s.bucket_reduced[k]) s.reduce_bucket(k);
  int by_hook = s.reduced_by_hook;
  s.reset_ready();
  s.reduced_by_hook = by_hook;  // kept for inspection until the next zero()
}

// ---- views ----

int GradBuffer::num_buckets() const { return static_cast<int>(state_->bucket_views.size()); }
at::Tensor GradBuffer::bucket(int k) const { return state_->bucket_views.at(k); }
const std::vector<int>& GradBuffer::bucket_params(int k) const { return state_->bucket_members.at(k); }
at::Tensor GradBuffer::param_grad(int i) const { return state_->grad_views.at(i); }
at::Tensor GradBuffer::data() const { return state_->data; }
MainGrads GradBuffer::main_grads() const { return {state_->data, state_->grad_views}; }

std::vector<int64_t> MainGrads::offsets() const {
  std::vector<int64_t> out;
  for (const at::Tensor& v : views) {
    LG_CHECK(v.is_alias_of(flat), "MainGrads: a grad view is not a view of the flat buffer");
    out.push_back(v.storage_offset() - flat.storage_offset());
  }
  return out;
}

int64_t GradBuffer::numel() const { return state_->data.numel(); }
int GradBuffer::buckets_reduced_by_hook() const { return state_->reduced_by_hook; }

}  // namespace loopgate
