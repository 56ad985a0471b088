/* 40 children that exit at once and are never reaped; then the parent
   counts the zombies in /proc and exits 0 without waiting for them. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
	int made = 0;
	for (int i = 0; i < 40; i++) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		if (p > 0)
			made++;
	}
	usleep(200000);
	int zombies = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[300], state;
		int pid, ppid;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%d %*s %c %d", &pid, &state, &ppid) == 3 && state == 'Z' && ppid == getpid())
			zombies++;
		fclose(f);
	}
	printf("made %d zombies %d\n", made, zombies);
	return 0;
}
