/* fork() in an endless loop in every process: the pids limit must stop it,
   the clock must end it, and nothing may survive the run. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
	printf("forking\n");
	fflush(stdout);
	for (;;)
		fork();
}
