// Spike (results/spikes/zygote-64): the stub mpiexec starts: connects to the zygote, sends fds 0-2 and its environment,
// waits for the forked rank's exit code and exits with it.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
extern char** environ;
int main(int argc, char** argv) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
  if (connect(s, (void*)&a, sizeof a)) { perror("connect"); return 99; }
  int fds[3] = {0, 1, 2}; char byte = 0; struct iovec io = {&byte, 1};
  char cbuf[CMSG_SPACE(sizeof fds)];
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr* h = CMSG_FIRSTHDR(&m); h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(h), fds, sizeof fds);
  sendmsg(s, &m, 0);
  size_t len = 0; for (char** e = environ; *e; ++e) len += strlen(*e) + 1;
  char* b = malloc(len), *p = b; for (char** e = environ; *e; ++e) { strcpy(p, *e); p += strlen(*e) + 1; }
  write(s, &len, sizeof len); write(s, b, len);
  int code = 98; read(s, &code, sizeof code);
  return code;
}
