/* A child stops itself and the parent stops itself: a stopped tree. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
	printf("stopping\n");
	fflush(stdout);
	if (fork() == 0) {
		raise(SIGSTOP);
		for (;;)
			pause();
	}
	raise(SIGSTOP);
	printf("continued\n");
	return 0;
}
