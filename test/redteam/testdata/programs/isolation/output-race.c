// A TOCTOU race on output files: a daemon (detached, in its own session)
// keeps swapping race.txt between a regular file and a symlink to
// /etc/passwd, and racedir between a directory and a symlink to /etc,
// until the run ends. Output files are read only once every process of the
// run is dead, so the host sees one final state and never follows a link.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void regular(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	write(fd, data, strlen(data));
	close(fd);
}

static void swapper(void) {
	for (unsigned long i = 0;; i++) {
		regular("/work/race.tmp", "benign\n");
		rename("/work/race.tmp", "/work/race.txt");
		symlink("/etc/passwd", "/work/race.lnk");
		rename("/work/race.lnk", "/work/race.txt");
		// The directory: a real one with a file, or a link to /etc.
		mkdir("/work/racedir.new", 0755);
		regular("/work/racedir.new/passwd", "benign\n");
		if (i % 2 == 0) {
			if (renameat2(AT_FDCWD, "/work/racedir.new", AT_FDCWD, "/work/racedir", RENAME_EXCHANGE) != 0)
				rename("/work/racedir.new", "/work/racedir");
		} else {
			symlink("/etc", "/work/racedir.lnk");
			renameat2(AT_FDCWD, "/work/racedir.lnk", AT_FDCWD, "/work/racedir", RENAME_EXCHANGE);
		}
		unlink("/work/racedir.lnk");
		unlink("/work/racedir.new/passwd");
		rmdir("/work/racedir.new");
		// A file that flips between regular and FIFO.
		unlink("/work/flip.txt");
		if (i % 2)
			mkfifo("/work/flip.txt", 0644);
		else
			regular("/work/flip.txt", "benign\n");
	}
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	for (int n = 0; n < 2; n++) {
		pid_t p = fork();
		if (p == 0) {
			setsid();
			if (fork() == 0)
				swapper();
			_exit(0);
		}
	}
	printf("SWAPPERS STARTED\n");
	usleep(500000);
	struct stat st;
	lstat("/work/race.txt", &st);
	printf("race.txt is now a %s\n", S_ISLNK(st.st_mode) ? "symlink" : "file");
	printf("MAIN EXITS\n");
	return 0;
}
