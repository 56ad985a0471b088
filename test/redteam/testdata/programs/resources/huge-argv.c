/* execve with a 2 MiB argv, a 2 MiB environment and one 200 KiB string
   (over MAX_ARG_STRLEN): each must fail with E2BIG, and a modest 256 KiB
   argv must still work. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *blob(size_t n, char c) {
	char *s = malloc(n + 1);
	memset(s, c, n);
	s[n] = 0;
	return s;
}

static void try_exec(const char *what, char **argv, char **envp) {
	pid_t p = fork();
	if (p == 0) {
		execve("/bin/true", argv, envp);
		_exit(errno == E2BIG ? 42 : 43);
	}
	int st;
	waitpid(p, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 42)
		printf("%s: E2BIG\n", what);
	else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		printf("%s: ran\n", what);
	else
		printf("%s: other %d\n", what, st);
}

int main(void) {
	enum { N = 32 }; /* 32 x 64 KiB = 2 MiB */
	char *argv[N + 2], *envp[N + 1], *none[] = {NULL};
	argv[0] = "true";
	for (int i = 0; i < N; i++)
		argv[i + 1] = blob(64 << 10, 'a');
	argv[N + 1] = NULL;
	try_exec("argv", argv, none);

	char *one[] = {"true", NULL};
	for (int i = 0; i < N; i++) {
		envp[i] = blob(64 << 10, 'e');
		envp[i][0] = 'V', envp[i][1] = 'A' + i % 26, envp[i][2] = 'A' + i / 26, envp[i][3] = '=';
	}
	envp[N] = NULL;
	try_exec("env", one, envp);

	char *long1[] = {"true", blob(200 << 10, 'l'), NULL};
	try_exec("strlen", long1, none);

	argv[5] = NULL; /* 4 x 64 KiB */
	try_exec("small", argv, none);
	return 0;
}
