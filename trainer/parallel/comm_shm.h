// ShmComm: a CPU backend of Comm whose collectives go through one shared-memory segment of the group's ranks (all on
// one host), with waits that sleep in the kernel (futex) instead of polling. Built for many ranks on few cores (dp64:
// 64 ranks on 2): Open MPI's waits there yield in a loop and every collective steps through the ranks in turn
// (docs/timings.md "Where dp64's kernel time goes"). Point-to-point stays on MPI (the group's communicator).
//
// Float sums are added in group-rank order (kNative and kFixed alike) or in kPermuted's order, through
// sum_in_order: the bits equal MpiComm's under kFixed or kPermuted (suites/mpi/test_comm.cpp holds it).
#pragma once
#include <mpi.h>

#include "trainer/parallel/comm.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

// Wraps `comm` (not owned unless own=true). Collective over `comm`: every rank calls it. Every rank of `comm` must
// share this host (an InputError otherwise).
CommPtr make_shm_comm(MPI_Comm comm, const CommOptions& options = {}, bool own = false);

// make_mpi_groups' groups, each a ShmComm.
ProcessGroups make_shm_groups(const Layout& layout, MPI_Comm base, const CommOptions& options = {});

}  // namespace loopgate
