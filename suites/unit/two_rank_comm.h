// A test double for one rank of a two-rank group: every collective does nothing (all-gather and reduce-scatter
// hand the tensor back); a test overrides the one it stands a peer in for.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "trainer/parallel/comm.h"

namespace loopgate {

class TwoRankComm : public Comm {
 public:
  explicit TwoRankComm(int rank = 0) : rank_(rank) {}
  const char* backend() const override { return "two-rank test double"; }
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  void all_reduce(at::Tensor&, ReduceOp) override {}
  at::Tensor all_gather(const at::Tensor& t) override { return t; }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp) override { return t; }
  void broadcast(at::Tensor&, int) override {}
  void send(const at::Tensor&, int) override {}
  void recv(at::Tensor&, int) override {}
  void send_recv(const at::Tensor&, int, at::Tensor&, int) override {}
  void barrier() override {}
  int64_t calls() const override { return 0; }
  void restart(const CommOptions&) override {}

 private:
  int rank_;
  std::vector<int> ranks_ = {0, 1};
};

}  // namespace loopgate
