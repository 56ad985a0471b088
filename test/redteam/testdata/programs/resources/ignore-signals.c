/* Ignore (or block) every signal the kernel lets us, then sleep forever,
   restarting the sleep whenever something interrupts it. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
	int ignored = 0;
	for (int s = 1; s < NSIG; s++)
		if (signal(s, SIG_IGN) != SIG_ERR)
			ignored++;
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	printf("ignored %d signals\n", ignored);
	fflush(stdout);
	for (;;)
		pause();
}
