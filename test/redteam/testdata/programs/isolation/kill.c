// Signals cannot reach beyond the run: kill(1) fails (init is another
// user, and a pid namespace's init ignores signals from inside), no host
// pid exists in our namespace, and kill(-1) reaches only our own processes.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *en(int r) {
	if (r == 0)
		return "DELIVERED";
	switch (errno) {
	case EPERM: return "EPERM";
	case ESRCH: return "ESRCH";
	}
	return strerror(errno);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("kill(1, SIGKILL) %s\n", en(kill(1, SIGKILL)));
	printf("kill(1, SIGTERM) %s\n", en(kill(1, SIGTERM)));
	printf("kill(1, SIGSTOP) %s\n", en(kill(1, SIGSTOP)));
	printf("kill(1, 0) %s\n", en(kill(1, 0)));

	// Every pid that exists for us (kill(pid, 0) does not fail with ESRCH):
	// only the sandbox's init and its few threads (EPERM: not ours to
	// signal; mostly below the runs' pids, which start at 33, but a thread
	// the init's Go runtime adds while a run lasts takes a pid among the
	// run's) and our own process: nothing we could signal.
	pid_t self = getpid();
	int others = 0, signalable = 0, maxpid = 0;
	for (pid_t pid = 2; pid < 1 << 16; pid++) {
		if (pid == self)
			continue;
		int r = kill(pid, 0);
		if (r == 0 || errno == EPERM) {
			printf("pid %d EXISTS %s\n", pid, en(r));
			others++;
			if (r == 0)
				signalable++;
			maxpid = pid;
		}
	}
	printf("OTHER PIDS %d, max %d, signalable %d\n", others, maxpid, signalable);
	printf("OTHER PIDS %s\n", signalable == 0 && others <= 16 ? "INIT ONLY" : "FOREIGN");
	// Typical host pids, by number: none exists here.
	const int host[] = {100, 300, 1000, 4000, 32768, 65535, 4194303};
	int any = 0;
	for (int i = 0; i < 7; i++) {
		if (host[i] == self)
			continue;
		int r = kill(host[i], SIGKILL);
		if (r == 0 || errno != ESRCH)
			printf("host pid %d %s\n", host[i], en(r)), any++;
	}
	printf("HOST PIDS %s\n", any ? "REACHABLE" : "UNREACHABLE");
	// kill(-1) signals every process we may signal but ourselves and init:
	// here only our own child. Init surviving means we survive too.
	pid_t victim = fork();
	if (victim == 0) {
		pause();
		_exit(0);
	}
	usleep(50000);
	int r = kill(-1, SIGKILL);
	int st = 0;
	waitpid(victim, &st, 0);
	printf("kill(-1) %s, child %s\n", en(r), WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "KILLED" : "SURVIVED");
	usleep(100000);
	printf("kill(1, 0) after %s\n", en(kill(1, 0)));
	printf("ALIVE\n");
	return 0;
}
