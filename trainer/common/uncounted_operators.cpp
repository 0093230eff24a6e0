#include "trainer/common/uncounted_operators.h"

namespace loopgate {
namespace {
thread_local int t_depth = 0;
}  // namespace

UncountedOperators::UncountedOperators() { ++t_depth; }
UncountedOperators::~UncountedOperators() { --t_depth; }
bool operators_uncounted() { return t_depth > 0; }

}  // namespace loopgate
