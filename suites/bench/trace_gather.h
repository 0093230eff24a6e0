// What the gate's Trace gather costs each rank per scenario (fixtures/fixtures.cpp gather_trace): one rank's
// records encoded, and every rank's records decoded. dp64 runs each scenario's gather on 64 ranks sharing two
// cores, so every rank decodes 64 Traces and the fixture pays 64 x 64 decodes per scenario. The records are a
// dp64 clean run's shape (three iterations, 22 recorded collectives each, three timer intervals). Host code only.
#pragma once

namespace loopgate::bench {

void register_trace_gather_benchmarks();

}  // namespace loopgate::bench
