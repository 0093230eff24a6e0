// The batched read: values kept on the device (or host values) packed into one tensor, reduced over the world
// in one collective, read once. Every deferred site of every protocol family ends in one of these.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/measure/async_copy.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// Values for one batched read: device scalars (or host doubles) packed into one tensor, MAX-reduced over the
// world in one collective, read once. Absent values are -inf, so the MAX picks the rank that has one; a MIN
// rides as the MAX of its negation; a NaN on any rank stays NaN (a flag rides beside it: NCCL's max drops NaN).
// Host values are packed on the host and reach the device in pinned, non-blocking copies (no kernel, no sync): the
// batched read must not launch more than the eager reads it replaces. Values keep the order they were added in,
// on every rank — a key one rank holds on the device and another holds as absent (a host -inf) must meet itself
// in the MAX.
class Bundle {
 public:
  void add(const std::string& key, const at::Tensor& value);  // any dtype, one element
  void add_all(const std::string& prefix, const at::Tensor& values);  // n elements, keys prefix@0 .. prefix@n-1
  void add_host(const std::string& key, double value);
  void add_absent(const std::string& key);
  bool empty() const { return keys_.empty(); }
  // One all-reduce (MAX over `world`) unless `reduce` is false, then one read through `read` (its issue, its
  // wait, its values: async_copy.h).
  std::map<std::string, double> resolve(AsyncRead& read, Comm& world, bool reduce = true);
  // resolve in two halves, for a read that trails other device work: issue packs, reduces and issues the copy;
  // land waits on it and gives the values.
  void issue(AsyncRead& read, Comm& world, bool reduce = true);
  std::map<std::string, double> land(AsyncRead& read) const;
  at::Tensor packed() const;  // [n] double on the run's device, in the order added
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  struct Part {
    at::Tensor device;          // device values (double), or
    std::vector<double> host;   // a run of host values
  };
  std::vector<std::string> keys_;
  std::vector<Part> parts_;
};

}  // namespace loopgate
