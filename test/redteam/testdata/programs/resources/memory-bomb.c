/* malloc + memset 1 MiB at a time, forever: the memory cgroup must OOM-kill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
	for (size_t mb = 1;; mb++) {
		char *p = malloc(1 << 20);
		if (!p) {
			printf("malloc failed at %zu MiB\n", mb);
			return 3;
		}
		memset(p, 0x5a, 1 << 20);
	}
}
