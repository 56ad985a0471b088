fn main() {
    println!("exiting with 3");
    std::process::exit(3);
}
