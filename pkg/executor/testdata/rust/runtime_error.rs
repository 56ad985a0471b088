fn main() {
    // The divisor is 0 at run time (no arguments), unknown at compile time.
    let divisor = std::env::args().count() as i32 - 1;
    println!("{}", 1 / divisor);
}
