#include "trainer/common/transport_work.h"

namespace loopgate {
namespace {
thread_local int t_depth = 0;
}  // namespace

TransportWork::TransportWork() { ++t_depth; }
TransportWork::~TransportWork() { --t_depth; }
bool in_transport_work() { return t_depth > 0; }

}  // namespace loopgate
