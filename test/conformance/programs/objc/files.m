#import <objc/Object.h>
#include <ctype.h>
#include <stdio.h>

@interface Upper : Object
+ (int)copyFrom:(const char *)src to:(const char *)dst;
@end

@implementation Upper
+ (int)copyFrom:(const char *)src to:(const char *)dst {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) { perror("fopen"); return 1; }
    int c;
    while ((c = fgetc(in)) != EOF) fputc(toupper(c), out);
    fclose(in);
    return fclose(out) != 0;
}
@end

int main(void) {
    return [Upper copyFrom:"input.txt" to:"output.txt"];
}
