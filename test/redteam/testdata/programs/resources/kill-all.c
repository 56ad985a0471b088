/* kill(-1, SIGKILL): every process this one may signal. Inside the sandbox
   that must be only the run's own processes; PID 1 is immune. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
	pid_t kids[5];
	for (int i = 0; i < 5; i++)
		if ((kids[i] = fork()) == 0)
			for (;;)
				pause();
	usleep(50000);
	printf("kill(1, SIGKILL) = %d\n", kill(1, SIGKILL));
	int r = kill(-1, SIGKILL);
	printf("kill(-1, SIGKILL) = %d %s\n", r, r ? strerror(errno) : "");
	int killed = 0;
	for (int i = 0; i < 5; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) == kids[i] && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed++;
	}
	printf("children killed %d\n", killed);
	printf("still alive\n");
	return 0;
}
