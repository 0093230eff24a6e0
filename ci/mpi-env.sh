# Source this before mpiexec on a root, oversubscribed, containerised machine: the environment CTest sets per test,
# from its one home, ctest/mpi-env.list (a GLIBC_TUNABLES of the user's own wins).
while IFS='=' read -r key value; do
  [[ $key =~ ^[A-Za-z_]+$ ]] || continue
  if [[ $key == GLIBC_TUNABLES ]]; then export GLIBC_TUNABLES="${GLIBC_TUNABLES:-$value}"; else export "$key=$value"; fi
done < "$(dirname "${BASH_SOURCE[0]}")/../ctest/mpi-env.list"
unset key value
