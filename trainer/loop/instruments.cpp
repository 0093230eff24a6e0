#include "trainer/loop/instruments.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <utility>

#include "trainer/common/error.h"
#include "trainer/loop/digest_taps.h"
#include "trainer/loop/mutation.h"
#include "trainer/loop/sites.h"
#include "trainer/measure/async_copy.h"
#include "trainer/measure/op_counter.h"
#include "trainer/parallel/checked_comm.h"

namespace loopgate {

Instruments::Instruments(const RunConfig& cfg, Ledger& ledger)
    : cfg_(cfg), ledger_(ledger),
      collectives_(cfg.record_collectives ? std::make_shared<CollectiveLog>() : nullptr),
      digests_(cfg.digests ? std::make_shared<DigestLog>() : nullptr) {}

bool Instruments::switch_digests(bool on) {
  if (!digests_ || digests_->enabled() == on) return false;
  digests_->set_enabled(on);
  return true;
}

ProcessGroups Instruments::wrap(const ProcessGroups& g, int rank) const {
  ProcessGroups out = g;
#if LOOPGATE_HAS_CUDA
  if (cfg_.stress.on && cfg_.model.device.is_cuda()) {  // each collective behind a seeded, rank-asymmetric delay
    const uint64_t seed = cfg_.stress.seed * 1000003ULL + static_cast<uint64_t>(rank) * 7919ULL;
    out = {stressed_comm(out.world, seed), stressed_comm(out.tp, seed + 1), stressed_comm(out.dp, seed + 2),
           stressed_comm(out.pp, seed + 3), stressed_comm(out.mp, seed + 4)};
  }
#else
  (void)rank;
#endif
  if (cfg_.check_collectives) out = checked_groups(out);
  if (digests_) out = digested_groups(out, digests_);
  return collectives_ ? recorded_groups(out, collectives_) : out;
}

void Instruments::tap(GptStage& stage, const Arm* const* arm) {
  const bool tapped = (digests_ && digests_->enabled()) || (*arm)->mutated().changes_modules();
  if (tapped && !tap_) tap_ = make_loop_tap(arm, digests_.get());
  stage.tap = tapped ? tap_.get() : nullptr;
}

void Instruments::hook(ScheduleHooks& hooks) const {
  if (!digests_) return;
  DigestLog* log = digests_.get();
  hooks.on_forward_start = [log](int mb) { log->set_phase(DigestPhase::kForward, mb); };
  hooks.on_backward_start = [log](int mb) { log->set_phase(DigestPhase::kBackward, mb); };
}

void Instruments::start_capture_probe() {
  if (!cfg_.capture.enabled()) return;
  LG_INPUT_CHECK(cfg_.model.device.is_cuda(), "the capture probe needs --device cuda (CUDA graphs)");
  LG_INPUT_CHECK(cfg_.capture.iteration <= cfg_.train_iters, "capture probe iteration {} is past --train-iters {}",
                 cfg_.capture.iteration, cfg_.train_iters);
  capture_ = make_capture_session();
  LG_INPUT_CHECK(capture_ != nullptr, "the capture probe: this loopgate was built without the GPU tier");
}

void Instruments::region(int64_t iteration, const char* name, const std::function<void()>& body) {
  const CaptureSpec& spec = cfg_.capture;
  if (!capture_ || spec.region != name || spec.iteration != iteration + 1) {
    body();
    return;
  }
  CaptureVerdict& v = verdict_;
  v.attempted = true;
  v.region = name;
  v.iteration = iteration + 1;
  const size_t before = ledger_.records().size();
  capture_->begin();
  try {
    body();
    capture_->end();
    v.captured = true;
  } catch (const std::exception& e) {
    capture_->abandon();
    const std::string what = e.what();
    v.error = what.substr(0, what.find('\n'));
  }
  const std::vector<ReadRecord>& reads = ledger_.records();
  v.reads_in_region = static_cast<int64_t>(reads.size() - before);
  if (reads.size() > before) v.site = site_name(reads[before].site);
  if (!every_rank(v.captured)) throw CaptureStopped{};  // a graph captured here is simply never replayed
  capture_->replay();
  v.replayed = true;
}

uint64_t Instruments::checksum(const Params& params) {
  if (!cfg_.param_checksums || quiet_) return 0;
  std::vector<at::Tensor> values;
  for (const Param& p : params) values.push_back(p.value);
  return ledger_.checksum(values);  // a diagnostic read of the Trace, not a loop site
}

// Parameter i's record names: the parameter's, then its two Adam moments' (interned at the first call, digests.h).
const std::array<DigestLog::NameId, 3>& Instruments::names(const Params& params, size_t i) {
  for (size_t k = names_.size(); k < params.size(); ++k) {
    const std::string& name = params[k].name;
    names_.push_back({digests_->name_id(name), digests_->name_id(name + ".exp_avg"),
                      digests_->name_id(name + ".exp_avg_sq")});
  }
  return names_.at(i);
}

void Instruments::grads_reduced(const Params& params, const GradBuffer& buffer) {
  if (!digests_ || quiet_) return;
  for (size_t i = 0; i < params.size(); ++i) {
    const DigestLog::NameId name = names(params, i)[0];
    const at::Tensor g = buffer.param_grad(static_cast<int>(i));
    digests_->set_phase(DigestPhase::kGradReduction);
    digests_->add(name, "output", g);
    digests_->set_phase(DigestPhase::kClip);
    digests_->add(name, "input", g);
  }
  digests_->flush();
}

void Instruments::step_taken(const Params& params, const GradBuffer& buffer, const Adam& adam,
                             const at::Tensor& grad_norm, const at::Tensor& loss) {
  if (!digests_ || quiet_) return;
  if (grad_norm.defined()) {
    digests_->set_phase(DigestPhase::kClip);
    digests_->add("grad_norm", "output", grad_norm);
    for (size_t i = 0; i < adam.size(); ++i) {
      const auto& n = names(params, i);
      const at::Tensor g = buffer.param_grad(static_cast<int>(i));
      digests_->set_phase(DigestPhase::kClip);
      digests_->add(n[0], "output", g);
      digests_->set_phase(DigestPhase::kOptimizer);
      digests_->add(n[0], "input", g);
      digests_->add(n[0], "output", adam.main_params()[i]);
      digests_->add(n[1], "output", adam.exp_avg()[i]);
      digests_->add(n[2], "output", adam.exp_avg_sq()[i]);
    }
  }
  digests_->set_phase(DigestPhase::kLog);
  if (loss.defined()) digests_->add("lm_loss", "output", loss);
  digests_->flush();
}

void Instruments::note(IterationRecord& rec, int64_t iteration, const ProcessGroups& groups) const {
  rec.reads_per_site = ledger_.counts_by_name(iteration);
  if (collectives_) {
    rec.collectives = collectives_->take(iteration);
    rec.collective_groups = recorded_group_names(groups);
  }
  if (!cfg_.count_launches) return;
  rec.launches_per_site = OpCounter::instance().counts(iteration);
  if (ledger_.counting())
    for (const auto& [site, n] : OpCounter::instance().syncs(iteration)) rec.reads_per_site[site] += n;
}

void Instruments::attach_digests(Trace& trace, const Coord& coord) {
  if (!digests_) return;
  ScopedSite site("diagnostic_digests");  // a read outside every iteration, named apart for CUPTI
  std::map<int64_t, std::vector<DigestRecord>> by_iteration;
  for (DigestRecord& d : digests_->collect()) by_iteration[d.iteration].push_back(std::move(d));
  for (IterationRecord& r : trace.records) {
    r.digests = by_iteration[r.iteration];
    r.coord = fmt::format("tp {}, pp {}, dp {}", coord.tp, coord.pp, coord.dp);
  }
}

}  // namespace loopgate
