/* sigchld_default_exec [PROG [ARGS...]]: exec PROG (default: bash) with SIGCHLD back to its default
 * disposition. busybox `nc -ll -e` (guest b's end of the ssh stand-in between the rxe guests,
 * validate_ib_rsh.sh) runs its program, which it takes without arguments, with SIGCHLD ignored; every
 * child inherits that (a shell cannot reset a signal ignored at entry), and busybox `timeout` then fails
 * at once with exit 1. sshd resets it; this does the same for the stand-in. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  signal(SIGCHLD, SIG_DFL);
  if (argc < 2) {
    execlp("bash", "bash", (char*)NULL);
    perror("bash");
  } else {
    execvp(argv[1], argv + 1);
    perror(argv[1]);
  }
  return 127;
}
