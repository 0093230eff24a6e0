// The frame walker's stand-in where no CPython 3.11/3.12 internal headers were found (ctest/LoopgatePython.cmake).
#include "tools/cupti/py_stack.h"

namespace loopgate::pystack {

std::string unavailable_reason() { return LOOPGATE_PY_STACK_WHY; }
std::vector<Frame> current_frames(int) { return {}; }
const Frame* innermost_outside(const std::vector<Frame>&, const std::vector<std::string>&) { return nullptr; }
bool innermost_site(const std::vector<std::string>&, std::string*) { return false; }
std::string site_text(const Frame& f) { return f.file + ":" + std::to_string(f.line) + " " + f.function; }

}  // namespace loopgate::pystack
