// The calling thread's Python stack, read from inside a CUDA driver callback: which line of the user's Python
// made a host sync. It takes no GIL, calls no Python API that allocates, and touches no reference count: it only
// reads this thread's own interpreter frames, which no other thread pushes or pops (a thread that released the
// GIL inside a C call, as torch.cuda.synchronize does, keeps its frames as they were at the call). Python symbols
// are looked up at run time, so the library still loads into a process with no Python (then it finds no frame).
// Built against one Python's headers (3.11 or 3.12); another version in the process is reported and not read.
#pragma once
#include <string>
#include <vector>

namespace loopgate::pystack {

struct Frame {
  std::string file, function;  // code object's co_filename and co_qualname
  int line = 0;
};

// "" when this process runs the Python the walker was built for, else why frames cannot be read.
std::string unavailable_reason();

// Up to `max` frames of the calling thread, innermost first. Empty when the thread runs no Python.
std::vector<Frame> current_frames(int max = 64);

// The innermost frame whose file contains none of `skip` (substrings): the user's line; nullptr if none.
const Frame* innermost_outside(const std::vector<Frame>& frames, const std::vector<std::string>& skip);

// "file:line function", the file shortened to what follows site-packages/ or the working directory.
std::string site_text(const Frame& f);

// The calling thread's innermost frame outside `skip`, as site_text() writes it; false when there is none.
// What the counter asks at every sync, so it decodes one frame, not the stack: the other frames' files are
// compared in place, and a (code object, instruction) this thread named before is looked up, not decoded again.
// Decoding a line walks the code's whole line table, which costs tens of microseconds in a function as long as
// Megatron's training_log. A cached entry also keeps the code's file, name and first line, so a code object
// freed and another allocated at its address is decoded afresh unless all three match.
bool innermost_site(const std::vector<std::string>& skip, std::string* site);

}  // namespace loopgate::pystack
