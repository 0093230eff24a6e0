#include "trainer/parallel/layout.h"

#include <fmt/format.h>

#include "trainer/common/error.h"

namespace loopgate {

Layout Layout::build(int world, const LayoutConfig& c) {
  LG_INPUT_CHECK(world >= 1 && c.tp >= 1 && c.pp >= 1, "invalid layout: world={} tp={} pp={} (all must be >= 1)",
                 world, c.tp, c.pp);
  LG_INPUT_CHECK(world % (c.tp * c.pp) == 0,
                 "world size {} is not divisible by tp*pp = {}*{} = {} (dp would not be an integer)", world, c.tp,
                 c.pp, c.tp * c.pp);
  Layout l;
  l.world_ = world;
  l.tp_ = c.tp;
  l.pp_ = c.pp;
  l.dp_ = world / (c.tp * c.pp);
  l.sp_ = c.sequence_parallel && c.tp > 1;
  return l;
}

Coord Layout::coord(int r) const {
  LG_CHECK(r >= 0 && r < world_, "rank {} outside world {}", r, world_);
  return Coord{r % tp_, (r / tp_) % dp_, r / (tp_ * dp_)};
}

int Layout::rank_of(const Coord& c) const { return c.tp + tp_ * (c.dp + dp_ * c.pp); }

std::vector<int> Layout::tp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int t = 0; t < tp_; ++t) g.push_back(rank_of({t, c.dp, c.pp}));
  return g;
}

std::vector<int> Layout::dp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int d = 0; d < dp_; ++d) g.push_back(rank_of({c.tp, d, c.pp}));
  return g;
}

std::vector<int> Layout::pp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int p = 0; p < pp_; ++p) g.push_back(rank_of({c.tp, c.dp, p}));
  return g;
}

std::vector<int> Layout::mp_group(int rank) const {
  Coord c = coord(rank);
  std::vector<int> g;
  for (int p = 0; p < pp_; ++p)
    for (int t = 0; t < tp_; ++t) g.push_back(rank_of({t, c.dp, p}));
  return g;  // increasing: pp is the slow axis
}

std::vector<int> Layout::world_group() const {
  std::vector<int> g(world_);
  for (int r = 0; r < world_; ++r) g[r] = r;
  return g;
}

Layout::GroupColors Layout::group_colors(int rank) const {
  Coord c = coord(rank);
  return {c.dp + dp_ * c.pp, c.tp + tp_ * c.pp, c.tp + tp_ * c.dp, c.dp};
}

std::string Layout::describe() const {
  return fmt::format("tp={} pp={} dp={} sp={} world={}", tp_, pp_, dp_, sp_ ? "on" : "off", world_);
}

}  // namespace loopgate
