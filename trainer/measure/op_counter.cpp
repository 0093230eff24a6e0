// The operator counter: a global RecordFunction callback with a per-thread stack that tells launching operators
// from composite ones (a composite operator's kernels are its children's).
#include <cstdio>
#include <cstdlib>
#include "trainer/measure/op_counter.h"

#include <ATen/record_function.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/common/error.h"
#include "trainer/common/uncounted_operators.h"

namespace loopgate {
namespace {

struct State {
  std::mutex mu;
  // Keyed by the site name's pointer (site names have static storage): no string built per operator.
  std::map<int64_t, std::map<const char*, int64_t>> table;
  std::map<int64_t, std::map<const char*, int64_t>> syncs;  // op_synchronizes operators, outermost only
  std::atomic<bool> enabled{false};
  at::CallbackHandle handle = 0;  // the global callback while enabled (0: none)
};

State& state() {
  static State s;
  return s;
}

// Per open operator on this thread: did an operator dispatched inside it launch (itself or below)? An operator
// whose children only allocate or view (at::where allocating its result with at::empty) is the one that launches.
thread_local std::vector<char> t_child_launched;
thread_local int t_sync_depth = 0;  // open op_synchronizes operators: item() inside is_nonzero is one sync

bool counting_here() {
  return !operators_uncounted() && state().enabled.load(std::memory_order_relaxed);
}

// An operator's class by name, remembered per thread in a small table keyed by the name's address and confirmed by
// one string comparison (an autograd node's name may be a string another name reuses later): one comparison per
// operator instead of the two lists' ~75, which cost a counted CPU run more than the rest of the callback.
struct NameClass {
  bool launches_nothing = false, synchronizes = false;
};
NameClass classify(const char* name) {
  struct Entry {
    const char* address = nullptr;
    std::string name;
    NameClass cls;
  };
  thread_local std::array<Entry, 512> table;
  Entry& e = table[(reinterpret_cast<uintptr_t>(name) >> 3) % table.size()];
  if (e.address != name || e.name != name) {
    e.address = name;
    e.name = name;
    e.cls = {op_launches_nothing(name), op_synchronizes(name)};
  }
  return e.cls;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  t_child_launched.push_back(0);
  if (classify(fn.name()).synchronizes) {
    if (t_sync_depth++ == 0 && counting_here()) OpCounter::instance().add_sync(current_iteration(), current_site());
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (t_child_launched.empty()) return;  // the callback was registered while this operator ran
  const NameClass cls = classify(fn.name());
  if (cls.synchronizes && t_sync_depth > 0) --t_sync_depth;
  const bool child_launched = t_child_launched.back() != 0;
  t_child_launched.pop_back();
  const bool launches = !child_launched && !cls.launches_nothing;
  if ((launches || child_launched) && !t_child_launched.empty()) t_child_launched.back() = 1;
  if (!launches || !counting_here()) return;
  OpCounter::instance().add(current_iteration(), current_site());
  // Diagnostics: LOOPGATE_OP_TRACE=N prints every counted operator of ledger iteration N (which op a site adds).
  static const int64_t trace_iteration = [] {
    const char* v = std::getenv("LOOPGATE_OP_TRACE");
    return v ? std::atoll(v) : int64_t{-2};
  }();
  if (current_iteration() == trace_iteration) std::fprintf(stderr, "op %s %s\n", current_site(), fn.name());
}

}  // namespace

bool op_launches_nothing(const char* name) {
  static const char* const kNoKernel[] = {
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::view", "aten::_unsafe_view",
      "aten::reshape", "aten::_reshape_alias", "aten::as_strided", "aten::select", "aten::slice", "aten::narrow",
      "aten::expand", "aten::expand_as", "aten::squeeze", "aten::unsqueeze", "aten::t", "aten::transpose",
      "aten::permute", "aten::detach", "aten::detach_", "detach",  // "detach": autograd's record name
      "aten::alias", "aten::resize_", "aten::set_",
      "aten::lift_fresh", "aten::to", "aten::contiguous", "aten::_local_scalar_dense", "aten::item",
      "aten::is_nonzero", "aten::size", "aten::stride", "aten::numel", "aten::dim", "aten::unbind", "aten::split",
      "aten::chunk", "aten::split_with_sizes", "aten::flatten", "aten::view_as", "aten::result_type",
      "aten::is_same_size", "aten::_has_compatible_shallow_copy_type", "aten::_to_cpu", "aten::pin_memory",
      "aten::_pin_memory", "aten::is_pinned", "aten::requires_grad_", "aten::retains_grad", "aten::output_nr",
      "aten::_version", "aten::record_stream", "aten::unfold", "aten::diagonal", "aten::movedim", "aten::swapaxes",
      "aten::broadcast_tensors", "aten::zeros_like_placeholder"};
  for (const char* n : kNoKernel)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

bool op_synchronizes(const char* name) {
  // CUDA: _local_scalar_dense copies a value to the host (item, is_nonzero, a Scalar argument built from a
  // tensor, repeat_interleave without output_size); nonzero / argwhere / masked_select / unique size their output
  // from the device (boolean-mask index and index_put_ call nonzero); equal and allclose end in a host bool.
  static const char* const kSync[] = {
      "aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal", "aten::allclose",
      "aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select", "aten::_unique",
      "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive",
      "aten::bincount"};
  for (const char* n : kSync)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

OpCounter& OpCounter::instance() {
  static OpCounter c;
  return c;
}

void OpCounter::set_enabled(bool on) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  // Registered only while enabled: a registered callback costs every operator of every run (a third of a CPU
  // iteration of the gate's small models), counted or not.
  if (on && s.handle == 0)
    s.handle =
        at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end).scopes({at::RecordScope::FUNCTION}));
  if (!on && s.handle != 0) {
    at::removeCallback(s.handle);
    s.handle = 0;
  }
  s.enabled.store(on);
}

bool OpCounter::enabled() const { return state().enabled.load(); }

void OpCounter::reset() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().table.clear();
  state().syncs.clear();
}

OpTable OpCounter::table() const {
  std::lock_guard<std::mutex> lock(state().mu);
  OpTable out;
  for (const auto& [iteration, sites] : state().table)
    for (const auto& [site, n] : sites) out[iteration][site] += n;
  return out;
}

namespace {
// One iteration's row of `table` keyed by site name (site pointers with equal names merge).
std::map<std::string, int64_t> row(const std::map<int64_t, std::map<const char*, int64_t>>& table, int64_t iteration) {
  std::lock_guard<std::mutex> lock(state().mu);
  std::map<std::string, int64_t> out;
  auto it = table.find(iteration);
  if (it != table.end())
    for (const auto& [site, n] : it->second) out[site] += n;
  return out;
}
}  // namespace

std::map<std::string, int64_t> OpCounter::counts(int64_t iteration) const { return row(state().table, iteration); }
std::map<std::string, int64_t> OpCounter::syncs(int64_t iteration) const { return row(state().syncs, iteration); }

void OpCounter::add_sync(int64_t iteration, const char* site) {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().syncs[iteration][site];
}

void OpCounter::add(int64_t iteration, const char* site) {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().table[iteration][site];
}


}  // namespace loopgate
