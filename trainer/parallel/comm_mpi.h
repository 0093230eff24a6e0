// MpiComm: the CPU backend of Comm over an MPI communicator, and the builder of a rank's ProcessGroups from a
// Layout with MPI_Comm_split (every rank calls the splits in the same order, as MPI requires).
#pragma once
#include <mpi.h>

#include <vector>

#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// What every backend keeps of its MPI communicator (NCCL bootstraps over one too): this rank's place in it,
// group rank -> world rank, and the communicator itself, freed on destruction when owned (unless MPI is
// already finalized).
struct MpiGroup {
  MpiGroup(MPI_Comm comm, bool own);
  ~MpiGroup();
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  MPI_Comm comm;
  bool own;
  int rank = 0, size = 1;
  std::vector<int> world_ranks;
};

// Wraps `comm` (not owned unless own=true, then freed on destruction).
CommPtr make_mpi_comm(MPI_Comm comm, const CommOptions& options = {}, bool own = false);

// Builds world/tp/dp/pp/mp groups for this process over `base` (normally MPI_COMM_WORLD; MPI_COMM_SELF with a
// world-1 layout gives the single-rank reference inside a multi-rank job). The layout's world must equal the
// size of `base`.
ProcessGroups make_mpi_groups(const Layout& layout, MPI_Comm base, const CommOptions& options = {});

// The splits make_mpi_groups does, each group's communicator handed to `make` (owned): one definition of which
// ranks form which group for every backend built on an MPI communicator (comm_shm.h).
using CommOverMpi = CommPtr (*)(MPI_Comm comm, const CommOptions& options, bool own);
ProcessGroups split_groups(const Layout& layout, MPI_Comm base, const CommOptions& options, CommOverMpi make);

}  // namespace loopgate
