// Cross-run leakage, writer side: leave markers in every shared place a run
// can reach (/tmp, /dev/shm, /work, SysV shm/msg/sem, a POSIX message
// queue, an abstract unix socket), check that we see them ourselves, then
// hold them for a while so a concurrent run can look for them.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define KEY 0x5eed1e4b
#define ABSTRACT "sandbox-run-redteam-leak"

static void mark(const char *path) {
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (fd < 0 || write(fd, "LEAKMARK\n", 9) != 9) {
		printf("write %s FAILED %s\n", path, strerror(errno));
		return;
	}
	close(fd);
	printf("write %s OK\n", path);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	mark("/tmp/sandbox-run-leak");
	mark("/dev/shm/sandbox-run-leak");
	mark("/work/sandbox-run-leak");

	int shm = shmget(KEY, 4096, IPC_CREAT | 0666);
	int msg = msgget(KEY, IPC_CREAT | 0666);
	int sem = semget(KEY, 1, IPC_CREAT | 0666);
	printf("sysv shm=%s msg=%s sem=%s\n", shm >= 0 ? "OK" : strerror(errno), msg >= 0 ? "OK" : strerror(errno), sem >= 0 ? "OK" : strerror(errno));
	if (shm >= 0) {
		char *p = shmat(shm, NULL, 0);
		if (p != (void *)-1)
			strcpy(p, "LEAKMARK");
	}
	if (msg >= 0) {
		struct { long type; char text[16]; } m = {1, "LEAKMARK"};
		msgsnd(msg, &m, sizeof m.text, IPC_NOWAIT);
	}
	struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
	mqd_t mq = mq_open("/sandbox-run-leak", O_CREAT | O_RDWR, 0666, &attr);
	printf("mq %s\n", mq != (mqd_t)-1 ? "OK" : strerror(errno));

	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path + 1, ABSTRACT, strlen(ABSTRACT));
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ABSTRACT);
	if (bind(ls, (struct sockaddr *)&sa, len) == 0 && listen(ls, 16) == 0)
		printf("abstract OK\n");
	else
		printf("abstract FAILED %s\n", strerror(errno));

	// The markers are real: we ourselves see every one of them.
	int ok = access("/tmp/sandbox-run-leak", F_OK) == 0 && access("/dev/shm/sandbox-run-leak", F_OK) == 0 &&
		 shmget(KEY, 0, 0) >= 0 && msgget(KEY, 0) >= 0 && semget(KEY, 0, 0) >= 0 &&
		 mq_open("/sandbox-run-leak", O_RDONLY) != (mqd_t)-1;
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	ok = ok && connect(c, (struct sockaddr *)&sa, len) == 0;
	printf("SELF %s\n", ok ? "SEES ALL" : "MISSING SOME");

	// Hold everything while the concurrent reader looks.
	int held = 0;
	for (int i = 0; i < 40; i++) {
		usleep(100000);
		int a = accept(ls, NULL, NULL);
		if (a >= 0)
			held++;
	}
	printf("HELD accepted=%d\n", held);
	return 0;
}
