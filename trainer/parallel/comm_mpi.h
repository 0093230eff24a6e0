// MpiComm: the CPU backend of Comm over an MPI communicator, and the builder of a rank's ProcessGroups from a
// Layout with MPI_Comm_split (every rank calls the splits in the same order, as MPI requires).
#pragma once
#include <mpi.h>

#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// Wraps `comm` (not owned unless own=true, then freed on destruction).
CommPtr make_mpi_comm(MPI_Comm comm, const CommOptions& options = {}, bool own = false);

// Builds world/tp/dp/pp/mp groups for this process over `base` (normally MPI_COMM_WORLD; MPI_COMM_SELF with a
// world-1 layout gives the single-rank reference inside a multi-rank job). The layout's world must equal the
// size of `base`.
ProcessGroups make_mpi_groups(const Layout& layout, MPI_Comm base, const CommOptions& options = {});

}  // namespace loopgate
