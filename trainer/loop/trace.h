// The Trace: the contract between the trainer and everything that judges it (docs/design.md "The contract: a
// Trace"). One IterationRecord per (iteration, rank), flattened; rank 0 gathers them. JSON I/O stores every
// double as a hexfloat string beside a readable decimal, so a round trip is bit-exact — NaN payloads and signs,
// -0.0, denormals and infinities included; readers use the hex form only.
// Not here: gathering across ranks (fixtures) and parsing Megatron logs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/measure/digest_record.h"
#include "trainer/parallel/collective_call.h"
#include "trainer/timers/timer_interval.h"

namespace loopgate {

// ---- exact doubles ----

// "%a" hexfloat ("0x1.8p+1", "-0x0p+0", "inf", "-inf"); NaN as "nan(0x7ff8000000000000)" with its raw bits.
std::string hex(double v);
// Inverse of hex() (also accepts any strtod hexfloat/decimal); a malformed string -> InputError.
double from_hex(const std::string& s);
uint64_t double_bits(double v);
bool same_bits(double a, double b);

// ---- the record ----

enum class VerdictPhase { kBeforeStep, kAfterStep };
const char* verdict_phase_name(VerdictPhase phase);  // before_step | after_step

// When a fault verdict became known on the host, relative to optimizer.step.
struct FaultVerdict {
  int64_t iteration = -1;
  VerdictPhase phase = VerdictPhase::kBeforeStep;
  std::string action;  // rerun Decision action name: proceed | skip_step | abort
  bool operator==(const FaultVerdict& o) const {
    return iteration == o.iteration && phase == o.phase && action == o.action;
  }
};

struct IterationRecord {
  int64_t iteration = 0;
  int rank = 0;  // world rank
  double lm_loss = 0.0, params_norm = 0.0, grad_norm = 0.0, num_zeros = 0.0, learning_rate = 0.0,
         loss_scale = 0.0;
  bool skipped = false, nan = false;
  int64_t consumed_samples = 0;
  std::vector<TimerInterval> timer_intervals;       // reported at this iteration
  int64_t timer_window_first = 0, timer_window_last = 0;  // iterations the logged elapsed time covers (0: none)
  std::map<std::string, int64_t> reads_per_site;    // Ledger::counts_by_name
  std::map<std::string, int64_t> launches_per_site;  // OpCounter (CPU operators); empty when not counted
  std::vector<FaultVerdict> fault_verdicts;
  // The pipeline steps this rank's stage ran in this iteration, in order ("F0 F1 B0 ..."; ScheduleStep's
  // to_string). Empty in Traces written before it existed, in Traces parsed from Megatron logs, and on an
  // iteration that aborted before its step.
  std::string schedule;
  uint64_t param_checksum_before = 0, param_checksum_after = 0;
  bool exit_decision = false;
  // --record-collectives: every collective and transfer this rank issued in this iteration, in order, and the
  // groups it belongs to (recorded_comm.h). Empty otherwise, and on an iteration a CUDA graph replayed.
  std::vector<CollectiveCall> collectives;
  std::vector<std::string> collective_groups;
  // --digests: this rank's digests of the iteration, in the order taken, and its coordinates ("tp 1, pp 0, dp 0").
  std::vector<DigestRecord> digests;
  std::string coord;
};

struct Trace {
  std::string arm, fixture;
  int world = 1;
  std::vector<IterationRecord> records;             // any order; find() looks up by (iteration, rank)
  std::map<std::string, std::string> environment;   // BLAS, CPU capability, LibTorch version, compiler, ...
  // zerosync's abort: the iterations that ran, masked, past the fault before the log point that reported it (0:
  // none; JSON "iterations_past_fault", written only when > 0). A run outcome, not a logged value: traces_equal
  // leaves it out, the nan_detection gate checks it.
  int64_t iterations_past_fault = 0;

  const IterationRecord* find(int64_t iteration, int rank) const;
  std::vector<int64_t> iterations() const;  // sorted, unique
};

// Bit-exact equality of every field (doubles by bits). On mismatch `why` (if given) names the first difference.
bool records_equal(const IterationRecord& a, const IterationRecord& b, std::string* why = nullptr);

// The record's logged values (what a log point reads), a row each in the order the Trace compares them: its JSON,
// records_equal and the fixtures' field lookups go through these rows, so a new logged value is a record field and a
// row here.
struct LoggedField {
  const char* name;
  double IterationRecord::*member;
};
const std::vector<LoggedField>& logged_fields();
// A logged value of `r` by name; nullptr when `name` is not one.
const double* logged_value(const IterationRecord& r, const std::string& name);
bool traces_equal(const Trace& a, const Trace& b, std::string* why = nullptr);

// ---- JSON ----

nlohmann::json to_json(const IterationRecord& r);
IterationRecord record_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Trace& t);
Trace trace_from_json(const nlohmann::json& j);  // malformed -> InputError naming the field
std::string trace_to_string(const Trace& t, int indent = 1);
Trace trace_from_string(const std::string& text);
void write_trace(const Trace& t, const std::string& path);
// The form ranks send each other (the gate's Trace gather), never a file: MessagePack bytes.
std::vector<uint8_t> trace_to_wire(const Trace& t);
Trace trace_from_wire(const uint8_t* first, size_t size);  // malformed -> InputError naming the field
Trace read_trace(const std::string& path);

}  // namespace loopgate
