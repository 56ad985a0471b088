#import <objc/Object.h>

@interface Spinner : Object
+ (void)spin;
@end

@implementation Spinner
+ (void)spin {
    volatile unsigned long n = 0;
    for (;;) n++;
}
@end

int main(void) {
    [Spinner spin];
    return 0;
}
