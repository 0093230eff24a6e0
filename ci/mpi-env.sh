# Source this before mpiexec on a root, oversubscribed, containerised machine (what CTest sets per test).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# malloc's heap on transparent huge pages: each rank starts LibTorch and its ~290 libraries with fewer page faults
# (docs/design.md "CPU facts"). A value of the user's own wins.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.hugetlb=1}
# The kernels that set the bits: LibTorch's AVX2 path and OpenBLAS's Haswell sgemm, whatever the CPU (golden/).
export OMP_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell GTEST_COLOR=no
