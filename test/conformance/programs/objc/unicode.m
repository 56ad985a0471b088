#import <objc/Object.h>
#include <stdio.h>

@interface Greeter : Object
+ (void)say;
@end

@implementation Greeter
+ (void)say { printf("héllo wörld ✓ 日本\n"); }
@end

int main(void) {
    [Greeter say];
    return 0;
}
