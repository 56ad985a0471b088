/* Unbounded, non-tail recursion with a live frame: the stack rlimit ends it
   with SIGSEGV. */
#include <stdio.h>

static int down(int n) {
	volatile char frame[512];
	frame[0] = (char)n;
	return down(n + 1) + frame[0];
}

int main(void) {
	printf("recursing\n");
	fflush(stdout);
	return down(0);
}
