// Layout: the parallel topology of one run — tensor (tp), pipeline (pp) and data (dp) parallel degrees and
// sequence parallelism — with Megatron's default rank order "tp-cp-ep-dp-pp" (tp fastest, then dp, then pp;
// cp = ep = 1 here). Pure arithmetic: no MPI, so it is unit-tested for any world size.
// Megatron: core/parallel_state.py initialize_model_parallel, RankGenerator.
#pragma once
#include <string>
#include <vector>

namespace loopgate {

struct LayoutConfig {
  int tp = 1;
  int pp = 1;
  bool sequence_parallel = false;
};

struct Coord {
  int tp = 0, dp = 0, pp = 0;
  bool operator==(const Coord& o) const { return tp == o.tp && dp == o.dp && pp == o.pp; }
};

class Layout {
 public:
  // Throws InputError (one line naming every degree) when tp*pp does not divide world.
  static Layout build(int world, const LayoutConfig& config);

  int world() const { return world_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return dp_; }
  bool sequence_parallel() const { return sp_; }
  bool tp_enabled() const { return tp_ > 1; }
  bool pp_enabled() const { return pp_ > 1; }
  bool dp_enabled() const { return dp_ > 1; }

  Coord coord(int rank) const;              // tp_rank = r % tp; dp_rank = (r/tp) % dp; pp_rank = r/(tp*dp)
  int rank_of(const Coord& c) const;
  bool is_first_stage(int rank) const { return coord(rank).pp == 0; }
  bool is_last_stage(int rank) const { return coord(rank).pp == pp_ - 1; }

  // Ranks of the group `rank` belongs to, in increasing order (= the group's own rank order).
  std::vector<int> tp_group(int rank) const;     // consecutive ranks
  std::vector<int> dp_group(int rank) const;     // stride tp
  std::vector<int> pp_group(int rank) const;     // stride tp*dp
  std::vector<int> mp_group(int rank) const;     // model parallel = tp x pp (same dp rank)
  std::vector<int> world_group() const;

  // Split colors naming the group `rank` belongs to (ranks sharing a color form the group), one definition for
  // every backend so they build the same groups.
  struct GroupColors {
    int tp, dp, pp, mp;
  };
  GroupColors group_colors(int rank) const;

  std::string describe() const;  // "tp=2 pp=2 dp=2 sp=on world=8"

 private:
  int world_ = 1, tp_ = 1, pp_ = 1, dp_ = 1;
  bool sp_ = false;
};

}  // namespace loopgate
