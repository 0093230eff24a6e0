// loopgate CLI entry point: `loopgate run|gate|golden ...`. Subcommands live beside this file.
#include <cstdio>
int main() {
  std::puts("loopgate: not yet implemented");
  return 2;
}
