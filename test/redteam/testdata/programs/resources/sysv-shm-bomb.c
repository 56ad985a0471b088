/* Memory through SysV shared memory: 8 MiB segments, touched, detached and
   never removed, so no process holds them and killing one frees nothing.
   The memory cgroup must still stop it, and the segments must die with the
   run's IPC namespace. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

int main(void) {
	for (int i = 0; i < 64; i++) {
		int id = shmget(IPC_PRIVATE, 8 << 20, IPC_CREAT | 0600);
		if (id < 0) {
			printf("shmget: %s after %d MiB\n", strerror(errno), i * 8);
			return 1;
		}
		char *p = shmat(id, NULL, 0);
		if (p == (void *)-1) {
			printf("shmat: %s\n", strerror(errno));
			return 1;
		}
		memset(p, 's', 8 << 20);
		shmdt(p);
		printf("MiB %d\n", (i + 1) * 8);
		fflush(stdout);
	}
	printf("SURVIVED 512 MiB of detached segments\n");
	return 0;
}
