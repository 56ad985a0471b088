// An x32 syscall: getpid with the x32 bit (nr | 0x40000000). The filter
// must kill the process with SIGSYS; "AFTER" must never print.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
	printf("BEFORE\n");
	fflush(stdout);
	long r = syscall(SYS_getpid | 0x40000000L);
	printf("AFTER ret=%ld errno=%d\n", r, errno);
	return 0;
}
