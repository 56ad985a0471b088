// A foreign-architecture syscall: i386 getpid through int $0x80 from a
// 64-bit program. The filter must kill the process with SIGSYS before the
// kernel's compat path sees it; "AFTER" must never print.
#include <stdio.h>
#include <unistd.h>

int main(void) {
	printf("BEFORE\n");
	fflush(stdout);
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20 /* i386 getpid */) : "memory");
	printf("AFTER ret=%ld\n", ret);
	return 0;
}
