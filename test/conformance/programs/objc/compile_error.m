#import <objc/Object.h>

@interface Broken : Object
+ (int)value
@end

int main(void) {
    int x = "not an int"
    return x;
}
