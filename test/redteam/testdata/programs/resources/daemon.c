/* daemon(3): fork, setsid, chdir /, stdio to /dev/null; the original
   process exits 0. The daemon ignores every signal it can and busy-waits. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
	printf("daemonizing\n");
	fflush(stdout);
	if (daemon(0, 0) != 0) {
		perror("daemon");
		return 1;
	}
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_IGN);
	if (fork() == 0) /* and a second generation, for good measure */
		setsid();
	for (;;)
		sleep(1);
}
