#include <ctype.h>
#include <stdio.h>

int main(void) {
    FILE *in = fopen("input.txt", "rb"), *out = fopen("output.txt", "wb");
    if (!in || !out)
        return 1;
    int c;
    while ((c = getc(in)) != EOF)
        putc(toupper(c), out);
    return fclose(out) != 0;
}
