#include <stdio.h>
#include <sys/stat.h>

int main(void) {
    mkdir("out", 0755);
    FILE *f = fopen("out/result.txt", "w");
    if (!f) {
        perror("fopen");
        return 1;
    }
    fputs("result: ok", f);
    fclose(f);
    puts("written");
    return 0;
}
