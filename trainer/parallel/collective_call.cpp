// The one-line form of a CollectiveCall (collective_call.h).
#include "trainer/parallel/collective_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "trainer/common/error.h"

namespace loopgate {

std::string to_string(const CollectiveCall& c) {
  std::string peer;
  if (c.op == "send") peer = fmt::format(" ->{}", c.peer);
  else if (c.op == "recv") peer = fmt::format(" <-{}", c.peer);
  else if (c.peer >= 0) peer = fmt::format(" root {}", c.peer);
  return fmt::format("{} {} {}[{}]{} #{} @{}", c.group, c.op, c.dtype, c.count, peer, c.seq, c.scope);
}

namespace {

// Reads the next space-separated word of `s` from `pos` ("" at the end).
std::string word(const std::string& s, size_t& pos) {
  const size_t end = std::min(s.find(' ', pos), s.size());
  std::string w = s.substr(pos, end - pos);
  pos = end == s.size() ? end : end + 1;
  return w;
}

// A non-negative decimal that fits `T` (no sign, no spaces); false otherwise. Never throws (fuzzed input).
template <typename T>
bool number(const std::string& s, T* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

// By hand, not std::regex: a gate gathers every rank's Trace to every rank, and dp64's hold ~10^5 calls.
CollectiveCall parse_collective_call(const std::string& line) {
  auto bad = [&]() {
    return InputError(fmt::format(
        "trace JSON: collective '{}' is not 'GROUP OP DTYPE[COUNT] [->PEER|<-PEER|root R] #SEQ @SCOPE'", line));
  };
  CollectiveCall c;
  size_t pos = 0;
  c.group = word(line, pos);
  c.op = word(line, pos);
  const std::string typed = word(line, pos);
  const size_t open = typed.find('[');
  if (c.group.empty() || c.op.empty() || open == std::string::npos || typed.back() != ']') throw bad();
  c.dtype = typed.substr(0, open);
  if (!number(typed.substr(open + 1, typed.size() - open - 2), &c.count)) throw bad();
  std::string next = word(line, pos);
  std::string arrow;
  if (next.rfind("->", 0) == 0 || next.rfind("<-", 0) == 0) {
    arrow = next.substr(0, 2);
    next = next.substr(2);
  } else if (next == "root") {
    arrow = "root";
    next = word(line, pos);
  }
  if (!arrow.empty()) {
    if (!number(next, &c.peer)) throw bad();
    next = word(line, pos);
  }
  const std::string scope = word(line, pos);
  if (next.size() < 2 || next[0] != '#' || !number(next.substr(1), &c.seq) || scope.empty() || scope[0] != '@' ||
      pos != line.size())
    throw bad();
  c.scope = scope.substr(1);
  const bool transfer_arrow = arrow == "->" || arrow == "<-";
  LG_INPUT_CHECK(transfer_arrow == c.transfer() && (arrow != "->" || c.op == "send") && (arrow != "<-" || c.op == "recv"),
                 "trace JSON: collective '{}': a send takes ->PEER, a recv <-PEER, nothing else an arrow", line);
  return c;
}

}  // namespace loopgate
