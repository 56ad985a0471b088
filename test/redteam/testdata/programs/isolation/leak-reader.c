// Cross-run leakage, reader side: for argv[1] rounds of 0.1 s (default 30), look for every
// marker the writer leaves; none may ever be visible. Prints "CLEAN" when
// all probes stayed absent, else "LEAK <what>".
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
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

int main(int argc, char **argv) {
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	setvbuf(stdout, NULL, _IONBF, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path + 1, ABSTRACT, strlen(ABSTRACT));
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(ABSTRACT);
	int leaks = 0;
	for (int round = 0; round < rounds; round++) {
		const char *files[] = {"/tmp/sandbox-run-leak", "/dev/shm/sandbox-run-leak", "/work/sandbox-run-leak"};
		for (int i = 0; i < 3; i++)
			if (access(files[i], F_OK) == 0)
				printf("LEAK %s\n", files[i]), leaks++;
		if (shmget(KEY, 0, 0) >= 0)
			printf("LEAK sysv shm\n"), leaks++;
		if (msgget(KEY, 0) >= 0)
			printf("LEAK sysv msg\n"), leaks++;
		if (semget(KEY, 0, 0) >= 0)
			printf("LEAK sysv sem\n"), leaks++;
		if (mq_open("/sandbox-run-leak", O_RDONLY) != (mqd_t)-1)
			printf("LEAK mqueue\n"), leaks++;
		int c = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&sa, len) == 0)
			printf("LEAK abstract socket\n"), leaks++;
		else if (round == 0)
			printf("abstract %s\n", errno == ECONNREFUSED ? "ECONNREFUSED" : strerror(errno));
		close(c);
		if (leaks)
			break;
		usleep(100000);
	}
	// Our own IPC namespace starts empty.
	FILE *f = fopen("/proc/sysvipc/shm", "r");
	char line[512];
	int rows = 0;
	while (f && fgets(line, sizeof line, f))
		rows++;
	printf("sysvipc shm rows=%d\n", rows);
	if (rows > 1)
		leaks++;
	printf(leaks ? "LEAKED\n" : "CLEAN\n");
	return 0;
}
