#include "trainer/parallel/comm.h"

#include <ATen/ATen.h>

#include <numeric>
#include <random>

namespace loopgate {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

const char* cpu_comm_name(CpuComm c) { return c == CpuComm::kShm ? "shm" : "mpi"; }

at::Tensor sum_in_order(const at::Tensor& parts, const CommOptions& options, int64_t call) {
  const int n = static_cast<int>(parts.size(0));
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (options.order == ReduceOrder::kPermuted) {
    std::mt19937_64 rng(options.permute_seed * 1000003ULL + static_cast<uint64_t>(call));
    std::shuffle(order.begin(), order.end(), rng);
  }
  at::Tensor acc = parts[order[0]].clone();
  for (int i = 1; i < n; ++i) acc.add_(parts[order[i]]);
  return acc;
}

}  // namespace loopgate
