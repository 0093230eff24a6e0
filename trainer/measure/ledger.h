// The host-read ledger: the only way loop code reads a device value on the host, or builds a device scalar from
// a host value (docs/design.md "Sync accounting"). Every such read is counted per site per iteration, recorded in
// order (for Traces), and names the site for the watchdog (set_current_site). On CPU the reads cost nothing,
// but the counts are the same as on GPU, where the CUPTI counter checks them against what really synchronised.
// Not here: deciding *when* to read (the loop's site policies do that) or any collective.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace loopgate {

// ---- sites ----

// The places where Megatron's loop may wait on the device (docs/design.md "Megatron semantics the trainer ports"
// and "The seed change").
// Names (site_name) are stable: they are JSON keys in Traces and keys in golden/ budgets.
enum class Site {
  kRerunDecision,     // rerun_decision: rerun_state_machine._reduce_any (construction + read)
  kNanCheckLoss,      // nan_check_loss: validate_result on each microbatch loss
  kNanCheckGrad,      // nan_check_grad: validate_result on each grad bucket's local norm
  kUpdateSuccessful,  // update_successful: logical_and_across_model_parallel_group
  kGradNorm,          // grad_norm: reduce_max_stat / get_grad_norm_fp32
  kNumZeros,          // num_zeros: count_zeros_fp32
  kParamsNorm,        // params_norm: calc_params_l2_norm
  kLossScale,         // loss_scale: get_loss_scale().item()
  kLearningRate,      // learning_rate: reduce_max_stat on the LR
  kLossAccumSeed,     // loss_accum_seed: torch.tensor([0.0], device) seeding the loss accumulator
  kLossReport,        // loss_report: per-key loss average at the log point
  kTimers,            // timers: device synchronize in Timer.start/stop, the timers' gather read
  kExitVote,          // exit_vote: --exit-duration-in-mins all-reduce + read
  kBatchedLogRead,    // batched_log_read: the sync-free arm's single read at log points
  kOnesyncRead,       // onesync_read: the one-read-per-iteration arm's read
};
inline constexpr int kNumSites = 15;

const std::array<Site, kNumSites>& all_sites();
const char* site_name(Site site);  // static storage: safe to hand to set_current_site
std::optional<Site> try_parse_site(const std::string& name);
Site parse_site(const std::string& name);  // InputError naming the bad name and listing the good ones

// ---- the ledger ----

struct ReadRecord {
  int64_t iteration;
  Site site;
  int64_t numel;  // elements moved (0 for a bare synchronize)
  enum class Kind { kRead, kDeviceScalar, kSync } kind;
};

class Ledger {
 public:
  // Device -> host: one read at `site`. Works for any dtype and shape (bool and integers convert exactly;
  // int64 beyond 2^53 would round). Values in row-major order.
  std::vector<double> read(Site site, const at::Tensor& t);
  // Host -> device, eagerly (Megatron's torch.tensor([x], device=...)): a pageable copy that blocks on GPU,
  // so it counts one read at `site`. Shape [1]. device_tensor: the same for several values, shape [n].
  at::Tensor device_scalar(Site site, double value, const at::TensorOptions& options);
  at::Tensor device_tensor(Site site, const std::vector<double>& values, const at::TensorOptions& options);
  // A bare device synchronize (Megatron's torch.cuda.synchronize() in Timer.start/stop): counts one at `site`.
  void record_sync(Site site);
  // The wait of an asynchronous read of `numel` values (async_copy.h): counts one read at `site`.
  void record_read(Site site, int64_t numel);
  // --async-emulation: an asynchronous read issued into its buffer before the last copy landed (async_copy.h).
  void record_async_race();
  int64_t async_races() const;
  // Called at every host wait on the device the ledger sees (reads, device scalars, syncs, asynchronous reads'
  // waits; counted or not), outside its lock: --async-emulation's uploads land there (async_copy.h). One
  // observer; nullptr removes it.
  void set_wait_observer(std::function<void()> observer);

  void begin_iteration(int64_t iteration);
  int64_t iteration() const;
  // While alive, reads count at `iteration` (and CUPTI attributes its syncs there) without beginning it again: a
  // log point's read that lands while the next iteration runs (the trailing log read, train.cpp) is its own.
  class CountAs {
   public:
    CountAs(Ledger& ledger, int64_t iteration);
    ~CountAs();

   private:
    Ledger& ledger_;
    int64_t was_;
  };

  // Off: reads, device scalars and syncs still happen (they are the loop's), but nothing is counted or recorded
  // (`loopgate ab --arms A,A:bare` measures what the bookkeeping costs). The watchdog still learns the site.
  void set_counting(bool on);
  bool counting() const;

  // Reads at each site during `iteration` (sites with none are absent; an unseen iteration gives an empty map).
  const std::map<Site, int64_t>& counts(int64_t iteration) const;
  int64_t count(int64_t iteration, Site site) const;
  std::map<std::string, int64_t> counts_by_name(int64_t iteration) const;  // for Trace::reads_per_site
  int64_t total(Site site) const;  // over all iterations
  int64_t total() const;
  std::map<Site, int64_t> totals() const;
  const std::vector<ReadRecord>& records() const;  // every read, in order (not while another thread reads)

  // Diagnostics outside the counted region (Trace checksums): they do read (a sync on GPU), so they are
  // tallied apart, letting a CUPTI reconciliation subtract them.
  int64_t diagnostic_reads() const;
  uint64_t checksum(const std::vector<at::Tensor>& tensors);
  // A checkpoint's host copies of `tensors` (contiguous CPU tensors, the same dtypes): a read outside every
  // iteration, named apart for CUPTI as the checksums are.
  std::vector<at::Tensor> host_copies(const std::vector<at::Tensor>& tensors);
  // A checkpoint's device synchronize (`sync`: the timer around the save, Megatron's save_checkpoint_and_time):
  // outside every iteration as its copies are, and named as they are.
  void checkpoint_sync(const std::function<void()>& sync);

  void reset();  // forget everything; iteration back to 0

 private:
  void note(Site site, int64_t numel, ReadRecord::Kind kind);

  mutable std::mutex mu_;  // grad-ready hooks may run on the autograd thread
  int64_t iteration_ = 0;
  std::atomic<bool> counting_{true};  // read before the lock: off costs no lock
  std::map<int64_t, std::map<Site, int64_t>> counts_;
  std::vector<ReadRecord> records_;
  int64_t diagnostic_reads_ = 0;
  int64_t async_races_ = 0;
  std::function<void()> wait_observer_;
};

// FNV-1a 64 (over 8-byte words, then tail bytes) of each tensor (made contiguous, on the host), in order; also
// the dtype and shape.
// Not counted: call through Ledger::checksum from the loop.
uint64_t tensor_checksum(const std::vector<at::Tensor>& tensors);

}  // namespace loopgate
