// The GPU form of a flush's hash (digests.h; LOOPGATE_HAS_CUDA builds only): the chunk table goes up through the
// one upload path (pinned, no wait), and the kernel (digest_hash.cu) reads the tensors where they lie, on the
// current stream, behind the work that produced them.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "trainer/common/error.h"
#include "trainer/measure/async_copy.h"
#include "trainer/measure/digest_hash.h"
#include "trainer/measure/digests.h"

namespace loopgate {

void digest_chunks_on_device(const std::vector<DigestChunk>& chunks, const at::Tensor& out) {
  at::Tensor table = at::empty({static_cast<int64_t>(chunks.size()), 4}, at::kLong);  // host memory, [n, 4]
  std::memcpy(table.data_ptr(), chunks.data(), chunks.size() * sizeof(DigestChunk));
  const at::Tensor on_device = upload(table, out.device());
  const int rc = digest_chunks_cuda(reinterpret_cast<const DigestChunk*>(on_device.data_ptr<int64_t>()),
                                    on_device.size(0), reinterpret_cast<uint64_t*>(out.data_ptr<int64_t>()),
                                    c10::cuda::getCurrentCUDAStream(out.device().index()).stream());
  LG_CHECK(rc == 0, "digests: the hash kernel did not launch: {}", cudaGetErrorString(static_cast<cudaError_t>(rc)));
}

}  // namespace loopgate
