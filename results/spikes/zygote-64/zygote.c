// Spike (results/spikes/zygote-64, docs/timings.md): MPI ranks forked from one long-lived process that loaded the
// libraries once; `mpiexec` starts tiny stubs (stub.c) that hand it their environment and stdin/stdout/stderr.
// Usage: zygote SOCKET [LIBRARY to dlopen first]; then `mpiexec -n N stub SOCKET`. ZYG_ABORT=1: rank 1 aborts.
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dlfcn.h>

static int recv_all(int s, void* b, size_t n) { char* p = b; while (n) { ssize_t k = read(s, p, n); if (k <= 0) return -1; p += k; n -= k; } return 0; }

static int rank_main(void) {
  MPI_Init(NULL, NULL);
  int r, n, one = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (getenv("ZYG_ABORT") && r == 1) MPI_Abort(MPI_COMM_WORLD, 7);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("rank %d of %d: sum %d (pid %d, ppid %d)\n", r, n, sum, getpid(), getppid());
  MPI_Finalize();
  return sum == n ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 2) { void* h = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL); if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; } }
  signal(SIGCHLD, SIG_IGN);
  int ls = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
  unlink(argv[1]);
  if (bind(ls, (void*)&a, sizeof a) || listen(ls, 128)) { perror("bind"); return 1; }
  fprintf(stderr, "zygote ready\n");
  for (;;) {
    int c = accept(ls, NULL, NULL);
    if (c < 0) continue;
    // fds first (SCM_RIGHTS with a 1-byte payload), then env length + env block
    char byte; struct iovec io = {&byte, 1};
    char cbuf[CMSG_SPACE(3 * sizeof(int))];
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    if (recvmsg(c, &m, 0) <= 0) { close(c); continue; }
    int fds[3]; memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fds);
    size_t len; recv_all(c, &len, sizeof len);
    char* env = malloc(len); recv_all(c, env, len);
    if (fork() == 0) {  // monitor
      signal(SIGCHLD, SIG_DFL);
      pid_t p = fork();
      if (p == 0) {
        clearenv();
        for (char* e = env; e < env + len; e += strlen(e) + 1) putenv(e);
        dup2(fds[0], 0); dup2(fds[1], 1); dup2(fds[2], 2);
        close(c); close(ls);
        _exit(rank_main());
      }
      int st = 0; waitpid(p, &st, 0);
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      write(c, &code, sizeof code);
      _exit(0);
    }
    close(c); close(fds[0]); close(fds[1]); close(fds[2]); free(env);
  }
}
