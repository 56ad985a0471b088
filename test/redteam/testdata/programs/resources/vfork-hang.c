/* vfork() and a child that never execs nor exits: the parent waits in the
   kernel for ever. The wall clock must still end the run. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
	printf("vforking\n");
	fflush(stdout);
	if (vfork() == 0)
		for (;;)
			pause();
	printf("parent resumed\n");
	return 0;
}
