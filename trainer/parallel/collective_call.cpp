// The one-line form of a CollectiveCall (collective_call.h).
#include "trainer/parallel/collective_call.h"

#include <fmt/format.h>

#include <algorithm>

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

bool digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

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
  const std::string count = typed.substr(open + 1, typed.size() - open - 2);
  if (!digits(count)) throw bad();
  c.count = std::stoll(count);
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
    if (!digits(next)) throw bad();
    c.peer = std::stoi(next);
    next = word(line, pos);
  }
  const std::string scope = word(line, pos);
  if (next.size() < 2 || next[0] != '#' || !digits(next.substr(1)) || scope.empty() || scope[0] != '@' || pos != line.size())
    throw bad();
  c.seq = std::stoll(next.substr(1));
  c.scope = scope.substr(1);
  const bool transfer_arrow = arrow == "->" || arrow == "<-";
  LG_INPUT_CHECK(transfer_arrow == c.transfer() && (arrow != "->" || c.op == "send") && (arrow != "<-" || c.op == "recv"),
                 "trace JSON: collective '{}': a send takes ->PEER, a recv <-PEER, nothing else an arrow", line);
  return c;
}

}  // namespace loopgate
