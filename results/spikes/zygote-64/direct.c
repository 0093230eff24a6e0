// Spike (results/spikes/zygote-64): the baseline, one process per rank loading LIBRARY itself, then MPI hello.
#include <mpi.h>
#include <stdio.h>
#include <dlfcn.h>
int main(int argc, char** argv) {
  if (argc > 1 && !dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  MPI_Init(NULL, NULL);
  int r, n, one = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("direct rank 0 of %d: sum %d\n", n, sum);
  MPI_Finalize();
  return sum == n ? 0 : 1;
}
