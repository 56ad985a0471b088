#include <stdio.h>

int main(void) {
    char buf[256];
    FILE *f = fopen("data/input.txt", "r");
    if (!f) {
        perror("fopen");
        return 1;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    puts(buf);
    return 0;
}
