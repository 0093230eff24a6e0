// The mappings as torch::autograd::Function's. The Comm reaches backward through ctx->saved_data as an int64
// (the Comm outlives every graph built with it: the stage owns its groups). Collectives need contiguous
// tensors, so every helper makes its input contiguous first.
#include "trainer/model/mappings.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- collectives (Megatron _reduce, _split_along_*, _gather_along_*, _reduce_scatter_along_first_dim) ----

at::Tensor reduce(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
  tp.all_reduce(out);
  return out;
}

// Splits copy: an output that is a view of the input would alias it across the autograd boundary.
at::Tensor split_along_last_dim(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  int64_t n = x.size(-1);
  LG_CHECK(n % tp.size() == 0, "split_along_last_dim: {} not divisible by tp={}", n, tp.size());
  return x.narrow(-1, tp.rank() * (n / tp.size()), n / tp.size()).clone(at::MemoryFormat::Contiguous);
}

at::Tensor gather_along_last_dim(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  at::Tensor stacked = tp.all_gather(x.contiguous());  // [tp*d0, ...]
  return at::cat(stacked.chunk(tp.size(), 0), -1);
}

at::Tensor split_along_first_dim(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  int64_t n = x.size(0);
  LG_CHECK(n % tp.size() == 0, "split_along_first_dim: {} not divisible by tp={}", n, tp.size());
  return x.narrow(0, tp.rank() * (n / tp.size()), n / tp.size()).clone(at::MemoryFormat::Contiguous);
}

at::Tensor gather_along_first_dim(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return tp.all_gather(x.contiguous());
}

at::Tensor reduce_scatter_along_first_dim(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return tp.reduce_scatter(x.contiguous());
}

int64_t to_handle(Comm& c) { return reinterpret_cast<int64_t>(&c); }
Comm& comm_of(AutogradContext* ctx) { return *reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt()); }

// ---- one Function per mapping: forward and backward one call each ----

struct CopyToModelParallelRegion : torch::autograd::Function<CopyToModelParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x;  // autograd wraps a returned input as a view of it
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {reduce(g[0], comm_of(ctx)), at::Tensor()};
  }
};

struct ReduceFromModelParallelRegion : torch::autograd::Function<ReduceFromModelParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reduce(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], at::Tensor()}; }
};

struct ScatterToModelParallelRegion : torch::autograd::Function<ScatterToModelParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return split_along_last_dim(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {gather_along_last_dim(g[0], comm_of(ctx)), at::Tensor()};
  }
};

struct GatherFromModelParallelRegion : torch::autograd::Function<GatherFromModelParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return gather_along_last_dim(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {split_along_last_dim(g[0], comm_of(ctx)), at::Tensor()};
  }
};

struct ScatterToSequenceParallelRegion : torch::autograd::Function<ScatterToSequenceParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return split_along_first_dim(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {gather_along_first_dim(g[0], comm_of(ctx)), at::Tensor()};
  }
};

struct GatherFromSequenceParallelRegion : torch::autograd::Function<GatherFromSequenceParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm, bool tp_output_grad) {
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["tp_output_grad"] = tp_output_grad;
    return gather_along_first_dim(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    Comm& tp = comm_of(ctx);
    at::Tensor dx = ctx->saved_data["tp_output_grad"].toBool() ? reduce_scatter_along_first_dim(g[0], tp)
                                                                : split_along_first_dim(g[0], tp);
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterToSequenceParallelRegion : torch::autograd::Function<ReduceScatterToSequenceParallelRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reduce_scatter_along_first_dim(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {gather_along_first_dim(g[0], comm_of(ctx)), at::Tensor()};
  }
};

}  // namespace

// ---- public wrappers (Megatron names) ----

at::Tensor copy_to_tensor_model_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return CopyToModelParallelRegion::apply(x, to_handle(tp));
}

at::Tensor reduce_from_tensor_model_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return ReduceFromModelParallelRegion::apply(x, to_handle(tp));
}

at::Tensor scatter_to_tensor_model_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return ScatterToModelParallelRegion::apply(x, to_handle(tp));
}

at::Tensor gather_from_tensor_model_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return GatherFromModelParallelRegion::apply(x, to_handle(tp));
}

at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return ScatterToSequenceParallelRegion::apply(x, to_handle(tp));
}

at::Tensor gather_from_sequence_parallel_region(const at::Tensor& x, Comm& tp, bool tensor_parallel_output_grad) {
  if (tp.size() == 1) return x;
  return GatherFromSequenceParallelRegion::apply(x, to_handle(tp), tensor_parallel_output_grad);
}

at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& x, Comm& tp) {
  if (tp.size() == 1) return x;
  return ReduceScatterToSequenceParallelRegion::apply(x, to_handle(tp));
}

}  // namespace loopgate
